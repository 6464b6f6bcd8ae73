"""The human tier's bench (bench.review) runs end to end on a few items and reports
figures of the expected shape. Timings are never asserted: the machine is shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.review import measure, table

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_review_bench_measures_every_figure(kafka_bootstrap: str, tmp_path: Path) -> None:
    result = await measure(3, kafka_bootstrap, tmp_path)
    # Correctness is asserted: every race had one winner both replicas agree on.
    assert result["one_winner"] == result["replicas_agree"] == 3
    for key in ("visible_ms", "claim_ms", "answer_ms"):
        assert {"p50", "p95", "max", "n"} <= set(result[key]), key
    assert result["claim_ms"]["n"] == 6  # two reviewers per item
    assert result["answer_ms"]["n"] == 3
    assert result["rebuild_s"] > 0
    assert "exactly one winner: 3/3" in table(result)
