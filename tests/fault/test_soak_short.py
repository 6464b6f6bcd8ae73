"""A short soak in the suite: 8 users for 8 s. Nothing lost, nothing doubled,
every service's memory sampled throughout (the long run is ``make soak``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak import SoakConfig, run_soak
from soak.run import flatness, percentile

USERS = 8
# Long enough for every user to get several turns through under continuous load
# (what lost and doubled turns are counted over) and for ten-plus memory samples of
# each service at SAMPLE_S; memory growth itself is the long soak's question.
SECONDS = 8.0
SAMPLE_S = 0.5


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
