"""A short soak in the suite: 8 users for 8 s. Nothing lost, nothing doubled,
every service's memory sampled throughout (the long run is ``make soak``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak import SoakConfig, run_soak
from soak.run import (
    ServiceMemory,
    broker_growth,
    count_rewinds,
    flatness,
    judge_memory,
    percentile,
    thirds,
)

USERS = 8
# Long enough for every user to get several turns through under continuous load
# (what lost and doubled turns are counted over) and for ten-plus memory samples of
# each service at SAMPLE_S; memory growth itself is the long soak's question.
SECONDS = 8.0
SAMPLE_S = 0.5


@pytest.mark.heavy
@pytest.mark.broker
@pytest.mark.slow
async def test_short_soak_nothing_lost_nothing_doubled(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    report = await run_soak(
        SoakConfig(
            users=USERS,
            seconds=SECONDS,
            think_s=0.3,
            bootstrap=kafka_bootstrap,
            sample_s=SAMPLE_S,
            log_dir=tmp_path / "logs",
            results_dir=tmp_path / "results",
        )
    )
    print(report.summary())
    assert report.accepted >= USERS, "the users got no turn through"
    assert report.lost == 0, report.lost_turns
    assert report.doubled == 0, report.doubled_turns
    assert not any(report.restarts.values()), report.restarts
    assert report.p50_ms is not None and report.p99_ms is not None
    # Memory of every service was followed over the whole run.
    expected = {"shadow", "persona", "plasticity", "stability", "coach", "synth", "gateway"}
    assert set(report.memory) == expected
    assert all(len(m.samples_mb) >= 10 for m in report.memory.values())
    assert report.result_file is not None and _written(report.result_file)
    # No state view re-read itself from the start (the broker never lost a topic).
    assert report.rewinds == {}, report.rewinds
    assert len(report.thirds) == 3 and sum(t.answered for t in report.thirds) == report.answered
    # What a turn writes, by topic: every turn writes its message, its final and each
    # state record once (ListOffsets may trail a few records on the embedded broker).
    for topic in ("user-messages", "replies", "safety", "blackboard", "profiles", "memory"):
        records, kb = report.log_per_turn[topic]
        assert 0.5 <= records <= 1.5 and kb > 0, (topic, records, kb)
    assert report.log_per_turn["dlq"] == (0.0, 0.0)


def _written(path: str) -> bool:
    return Path(path).stat().st_size > 0


@pytest.mark.unit
def test_flatness_and_percentiles() -> None:
    flat = [(float(t), 100.0 + (t % 3)) for t in range(30)]
    growing = [(float(t), 100.0 + 4 * t) for t in range(30)]
    assert flatness(flat)[2] is True
    assert flatness(growing)[2] is False
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.5) is None


@pytest.mark.unit
def test_growth_while_a_cache_fills_is_not_a_leak() -> None:
    # The gateway's turn cache holds 10,000 turns: growth before it is full is the
    # cache reaching its bound (reported), growth after it is full is a leak (failed).
    growing = [(float(t), 100.0 + 4 * t) for t in range(30)]
    filling = ServiceMemory(samples_mb=list(growing))
    judge_memory("gateway", filling, [0.5] * 2_000)
    assert filling.verdict == "filling" and "turn cache 2,000/10,000" in filling.filling
    full = ServiceMemory(samples_mb=list(growing))
    judge_memory("gateway", full, [0.5] * 12_000)
    assert full.verdict == "GROWING" and full.judged_from_s == 0.5
    flat_after = ServiceMemory(samples_mb=[(float(t), 100.0 + min(t, 5) * 10) for t in range(30)])
    judge_memory("gateway", flat_after, [float(i) / 1000 for i in range(12_000)])
    assert flat_after.verdict == "flat" and flat_after.judged_from_s >= 9.9


@pytest.mark.unit
def test_thirds_and_rewinds(tmp_path: Path) -> None:
    done = [(t / 10, 10.0 + t) for t in range(300)]  # 30 s, latency rising
    first, second, last = thirds(done, 30.0)
    assert first.answered == second.answered == last.answered == 100
    assert first.per_s == last.per_s and last.p99_ms > first.p99_ms
    (tmp_path / "coach.log").write_text(
        "x partitions recreated under a reader, re-reading from the start: []\n" * 3
    )
    (tmp_path / "synth.log").write_text("nothing of the kind\n")
    assert count_rewinds(tmp_path) == {"coach": 3}


@pytest.mark.unit
def test_the_broker_growth_per_turn() -> None:
    mem = ServiceMemory(samples_mb=[(0.0, 100.0), (10.0, 150.0), (20.0, 200.0)])
    assert broker_growth(mem, 1024) == 100.0  # 100 MB over 1,024 turns: 100 KB each
    assert broker_growth(None, 10) is None
    assert broker_growth(ServiceMemory(samples_mb=[(0.0, 1.0)]), 10) is None


@pytest.mark.unit
def test_the_partitions_are_bounded() -> None:
    # --partitions becomes the stack's COACHBUS_PARTITIONS; a count no broker takes is
    # refused before anything starts.
    assert SoakConfig(partitions=24).partitions == 24
    for bad in (0, 257):
        with pytest.raises(ValueError, match="partitions"):
            SoakConfig(partitions=bad)
