"""Hardware profiles of the LLM simulator: the prefix cache, decode speeds and KV
admission they describe, the profile files, and the live simulator's counts (the
same model on a virtual clock: tests/bench/test_virtual_clock.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from coachbus.llm import sim as sim_module
from coachbus.llm.sim import SimConfig
from coachbus.llm.simprofile import (
    KVGate,
    PrefixCache,
    ProfileError,
    available,
    block_hashes,
    load,
    load_file,
)
from tests.fixtures.sim_profiles import profile, tokens
from tests.shared.llm.simserver import serve_in_background

# ---------------------------------------------------------------------- prefix cache


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


# ---------------------------------------------------------------------- KV capacity


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
