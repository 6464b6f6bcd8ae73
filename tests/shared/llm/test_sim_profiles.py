"""Hardware profiles of the LLM simulator: the serving model on a virtual clock (no
sleeps), the profile files, and the live simulator's prefix-cache counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from coachbus.llm import sim as sim_module
from coachbus.llm.sim import SimConfig
from coachbus.llm.simprofile import (
    KVGate,
    PrefixCache,
    Profile,
    ProfileError,
    SeedCall,
    VirtualEngine,
    VRequest,
    available,
    block_hashes,
    load,
    load_file,
    load_seed_design,
    simulate_seed,
    simulate_stages,
)
from tests.shared.llm.simserver import serve_in_background


def profile(**overrides: Any) -> Profile:
    """A small made-up profile with round numbers, so expectations are exact."""
    data: dict[str, Any] = {
        "name": "test",
        "prefill": {"tokens_per_s": 1000, "cached_tokens_per_s": 100000, "overhead_ms": 10},
        "decode": {"tokens_per_s": 100, "batch": [1, 2, 4], "relative": [1.0, 0.8, 0.5]},
        "kv_cache": {"capacity_tokens": 0, "block_tokens": 16},
    }
    for key, value in overrides.items():
        data[key] = {**data.get(key, {}), **value}
    return Profile.model_validate(data)


def tokens(tag: str, n: int) -> list[str]:
    return [f"{tag}{i}" for i in range(n)]


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


def test_prefix_cache_is_block_granular_chained_and_lru() -> None:
    cache = PrefixCache(capacity_blocks=3)
    a = block_hashes(tokens("a", 48), 16)  # three full blocks
    assert len(block_hashes(tokens("a", 47), 16)) == 2  # a partial block is not cached
    assert cache.serve(a, 48, 16) == 0
    # A prompt that shares the first block only hits that block: hashes are chained.
    b = block_hashes(tokens("a", 16) + tokens("b", 32), 16)
    assert cache.lookup(b) == 1
    # The last prompt token is always computed, so a repeat hits all but one.
    assert cache.serve(a, 48, 16) == 47
    cache.insert(block_hashes(tokens("c", 32), 16))  # evicts a's two oldest blocks
    assert cache.lookup(a) == 0
    assert PrefixCache(0).serve(a, 48, 16) == 0


# ---------------------------------------------------------------------- decode


def test_decode_per_sequence_falls_and_aggregate_rises_with_concurrency() -> None:
    p = profile()
    speeds = [p.decode_tps(n) for n in (1, 2, 3, 4, 8)]
    assert speeds == sorted(speeds, reverse=True)
    assert speeds[0] == 100 and speeds[1] == pytest.approx(80) and speeds[3] == pytest.approx(50)
    aggregate = [n * p.decode_tps(n) for n in (1, 2, 3, 4, 8)]
    assert aggregate == sorted(aggregate)
    assert aggregate[-1] == pytest.approx(aggregate[-2])  # flat past the last point
    for name in ("qwen3-30b-2x4090", "qwen3-235b-a40"):
        real = load(name)
        assert real.decode_tps(16) < real.decode_tps(4) < real.decode_tps(1)
        assert 16 * real.decode_tps(16) > 4 * real.decode_tps(4) > real.decode_tps(1)


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


def test_a_request_larger_than_the_cache_runs_alone_instead_of_blocking_forever() -> None:
    gate = KVGate(capacity_tokens=100, max_num_seqs=0, by_priority=False)
    assert gate.offer(500, 0, "huge")
    assert not gate.offer(10, 0, "next")
    assert gate.release(500) == ["next"]


def test_priority_policy_admits_the_lowest_priority_value_first() -> None:
    gate = KVGate(capacity_tokens=100, max_num_seqs=0, by_priority=True)
    assert gate.offer(100, 5, "running")
    gate.offer(100, 10, "late-low")
    gate.offer(100, 0, "urgent")
    assert gate.release(100) == ["urgent"]
    fifo = KVGate(capacity_tokens=100, max_num_seqs=0, by_priority=False)
    fifo.offer(100, 5, "running")
    fifo.offer(100, 10, "first")
    fifo.offer(100, 0, "second")
    assert fifo.release(100) == ["first"]
    assert fifo.withdraw("second") and fifo.waiting == 0


def test_max_num_seqs_limits_running_requests() -> None:
    gate = KVGate(capacity_tokens=0, max_num_seqs=2, by_priority=False)
    assert gate.offer(1, 0, "a") and gate.offer(1, 0, "b")
    assert not gate.offer(1, 0, "c")
    assert gate.release(1) == ["c"]


# ---------------------------------------------------------------------- files


def test_every_shipped_profile_loads() -> None:
    names = available()
    assert {"instant", "qwen3-30b-2x4090", "qwen3-235b-a40"} <= set(names)
    assert "seed_design" not in names
    for name in names:
        assert load(name).name == name
    instant = load("instant")
    assert instant.prefill_s(10_000) == 0 and instant.decode_tps(64) == float("inf")


def test_a_bad_profile_file_fails_with_the_file_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "bad"\n[prefill]\ntokens_per_s = -1\n'
        "[decode]\ntokens_per_s = 10\nbatch = [1, 2]\nrelative = [1.0]\n"
    )
    with pytest.raises(ProfileError) as err:
        load_file(bad)
    assert str(bad) in str(err.value)
    assert "prefill.tokens_per_s" in str(err.value) and "decode" in str(err.value)
    typo = tmp_path / "typo.toml"
    typo.write_text('name = "t"\n[prefill]\ntokens_per_s = 1\n[decode]\ntokens_per_s = 1\nx = 1\n')
    with pytest.raises(ProfileError, match=r"decode\.x"):
        load_file(typo)
    broken = tmp_path / "broken.toml"
    broken.write_text("name = ")
    with pytest.raises(ProfileError, match="not TOML"):
        load_file(broken)
    with pytest.raises(ProfileError, match=r"unknown profile .nope.*qwen3-30b-2x4090"):
        load("nope")


def test_the_command_line_takes_a_profile_and_refuses_a_bad_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = sim_module.config_from_args(["--profile", "qwen3-30b-2x4090", "--time-scale", "0.5"])
    assert config.profile is not None and config.profile.name == "qwen3-30b-2x4090"
    assert config.time_scale == 0.5
    assert sim_module.main(["--profile", "nope"]) == 2
    assert "unknown profile" in capsys.readouterr().out


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


# ---------------------------------------------------------------------- live simulator


async def test_the_live_simulator_counts_prompt_tokens_served_from_the_cache() -> None:
    # A clock 1000x faster: the test checks counts, never timings.
    config = SimConfig(profile=load("qwen3-30b-2x4090"), time_scale=0.001, seed=3)
    system = {"role": "system", "content": "Rules of the coach. " * 200}
    async with serve_in_background(config) as url, httpx.AsyncClient(timeout=30) as client:
        for question in ("How do I start?", "What if I fail?"):
            body = {
                "model": "Qwen/Qwen3-30B-A3B",
                "messages": [system, {"role": "user", "content": question}],
                "max_tokens": 20,
            }
            (await client.post(f"{url}/chat/completions", json=body)).raise_for_status()
        stats = (await client.get(url.removesuffix("/v1") + "/stats")).json()
    assert stats["prompt_tokens_cached"] >= 800
    assert stats["prompt_tokens_cached"] + stats["prompt_tokens_computed"] == stats["prompt_tokens"]
    first, second = stats["timeline"]
    assert first["cached_tokens"] == 0 and second["cached_tokens"] > 0
    assert second["user_tails"] == ["What if I fail?"]
    assert first["arrived"] <= first["first_token"] <= first["done"]


async def test_the_live_simulator_queues_beyond_kv_capacity_until_room_frees(
    tmp_path: Path,
) -> None:
    small = tmp_path / "small.toml"
    small.write_text(
        'name = "small"\n[prefill]\ntokens_per_s = 0\n'
        "[decode]\ntokens_per_s = 1000\n[kv_cache]\ncapacity_tokens = 600\n"
    )
    config = SimConfig(profile=load_file(small), time_scale=0.01, seed=3)
    body = {
        "model": "Qwen/Qwen3-30B-A3B",
        "messages": [{"role": "user", "content": "word " * 300}],
        "max_tokens": 40,
    }
    async with serve_in_background(config) as url, httpx.AsyncClient(timeout=30) as client:

        async def call() -> None:
            (await client.post(f"{url}/chat/completions", json=body)).raise_for_status()

        await asyncio.gather(call(), call())
        stats = (await client.get(url.removesuffix("/v1") + "/stats")).json()
    # Each needs ~350 of the 600 tokens: the second waits for the first to end.
    assert stats["queued"] == 1 and stats["waiting"] == 0
    first, second = sorted(stats["timeline"], key=lambda r: r["admitted"])
    assert not first["queued"] and second["queued"]
    assert second["admitted"] >= first["done"]
    assert stats["max_kv_used"] <= 600
