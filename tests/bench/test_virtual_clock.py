"""The LLM simulator's serving model on a virtual clock (bench/virtual_clock.py, no
sleeps): time to first token, prefix hits, batched decode, KV admission, and the
seed design on each hardware profile near the time the seed measured there."""

from __future__ import annotations

import pytest

from bench.virtual_clock import (
    SeedCall,
    VirtualEngine,
    VRequest,
    load_seed_design,
    simulate_seed,
    simulate_stages,
)
from coachbus.llm.simprofile import Profile, load
from tests.fixtures.sim_profiles import profile, tokens

pytestmark = pytest.mark.unit


def run_one(p: Profile, prompt: list[str], out: int = 1) -> VRequest:
    engine = VirtualEngine(p)
    req = VRequest("r", prompt, out)
    engine.submit(req)
    engine.run()
    return req


# ---------------------------------------------------------------------- TTFT


def test_ttft_grows_with_uncached_prompt_length() -> None:
    p = profile()
    ttfts = [run_one(p, tokens("a", n)).first_token for n in (100, 1000, 4000)]
    assert ttfts == sorted(ttfts) and len(set(ttfts)) == 3
    # 10 ms overhead + 1000 tokens at 1000 tokens/s.
    assert ttfts[1] == pytest.approx(0.010 + 1.0)


def test_ttft_falls_with_prefix_hits() -> None:
    p = profile()
    engine = VirtualEngine(p)
    shared = tokens("system", 1600)
    first = VRequest("first", shared + tokens("q1", 100), 1)
    second = VRequest("second", shared + tokens("q2", 100), 1)
    engine.submit(first)
    engine.run()
    engine.submit(second)
    engine.run()
    assert first.cached_tokens == 0
    # The whole shared prefix is 100 full blocks of 16.
    assert second.cached_tokens == 1600
    assert second.first_token - second.arrived < first.first_token - first.arrived
    cold = run_one(p, shared + tokens("q2", 100))
    assert second.first_token - second.arrived < cold.first_token


# ---------------------------------------------------------------------- decode


def test_a_batch_decodes_each_sequence_slower() -> None:
    p = profile(prefill={"tokens_per_s": 0, "overhead_ms": 0})
    alone = run_one(p, tokens("x", 10), out=101)
    assert alone.done == pytest.approx(1.0)  # 100 tokens after the first at 100/s
    engine = VirtualEngine(p)
    batch = [VRequest(f"r{i}", tokens(f"x{i}", 10), 101) for i in range(4)]
    for req in batch:
        engine.submit(req)
    engine.run()
    assert all(r.done == pytest.approx(2.0) for r in batch)  # 4 at 50 tokens/s each


# ---------------------------------------------------------------------- KV capacity


def test_requests_beyond_kv_capacity_queue_fifo_until_capacity_frees() -> None:
    p = profile(prefill={"tokens_per_s": 0, "overhead_ms": 0}, kv_cache={"capacity_tokens": 1000})
    engine = VirtualEngine(p)
    big = [VRequest(f"big{i}", tokens(f"b{i}", 500), 101) for i in range(2)]
    small = VRequest("small", tokens("s", 10), 11)
    engine.submit(big[0], 0.0)
    engine.submit(big[1], 0.1)  # 608 + 608 tokens > 1000: waits
    engine.submit(small, 0.2)  # would fit, but must not overtake the head
    engine.run()
    assert not big[0].queued and big[1].queued and small.queued
    assert big[1].admitted == pytest.approx(big[0].done)
    assert small.admitted == pytest.approx(big[0].done)  # both fit once big0 is gone
    assert engine.done[0].name == "big0"
    assert engine.gate.used == 0 and engine.gate.running == 0


# ---------------------------------------------------------------------- seed check


@pytest.mark.parametrize("name", ["qwen3-30b-2x4090", "qwen3-235b-a40"])
def test_the_seed_design_on_each_profile_lands_near_its_headline(name: str) -> None:
    """The seed's sequential-after-Shadow turn, computed on the profile, comes out
    near what the seed measured on that hardware (40 s / 108 s): the check that the
    profile's figures and the stated token counts hang together."""
    p = load(name)
    assert p.seed is not None
    (turn,) = simulate_seed(p, load_seed_design())
    headline = p.seed.full_synthesis_s
    assert 0.75 * headline <= turn.full_s <= 1.25 * headline
    assert turn.first_text_s < turn.full_s


def test_stages_run_one_after_another_chains_at_once_calls_in_a_chain_in_turn() -> None:
    p = profile(prefill={"tokens_per_s": 0, "overhead_ms": 0})
    call = SeedCall(shared_prefix_tokens=0, own_prompt_tokens=10, output_tokens=101)
    # Stage 1: a chain of two calls beside a chain of one; stage 2: one call.
    (turn,) = simulate_stages(p, [[[call, call], [call]], [[call]]])
    # Two decode together at 80 tokens/s (1.25 s), the chain's second alone (1 s),
    # then the last stage alone (1 s).
    assert turn.full_s == pytest.approx(3.25)
    assert len(turn.calls) == 4
    with pytest.raises(ValueError, match="one call"):
        simulate_stages(p, [[[call], [call]]])


def test_the_seed_design_slows_down_with_sixteen_users() -> None:
    p = load("qwen3-30b-2x4090")
    design = load_seed_design()
    (one,) = simulate_seed(p, design)
    many = simulate_seed(p, design, users=16)
    assert len(many) == 16
    assert min(t.full_s for t in many) > one.full_s
