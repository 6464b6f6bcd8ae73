"""The human tier's bench (bench.review) runs end to end on a few items and reports
figures of the expected shape: racing claims on two replicas, crisis messages through
the whole pipeline to a scripted reviewer's answer, and the review console over a
growing queue in headless Chromium. Timings are never asserted: the machine is shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.review import (
    console_table,
    crisis_table,
    measure,
    measure_console,
    measure_crisis,
    pipeline,
    table,
)
from tests.browser.cdp import find_chromium

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


@pytest.mark.heavy
async def test_a_crisis_message_reaches_the_person_through_a_scripted_reviewer(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with pipeline(kafka_bootstrap, tmp_path, persons=1 + 3) as pipe:
        result = await measure_crisis(pipe, 3)
    # Every run's answer reached the person on the stream they had open: a turn that
    # went to a human keeps it open past the final for the answer.
    assert result["runs"] == result["human_arrived"] == 3
    assert result["via"] == {"stream": 3}
    assert result["think_time_ms"] == 0
    for key in ("total_ms", "listed_ms", "claim_ms", "delivered_ms", "final_ms"):
        assert result[key]["n"] == 3, key
    assert "answer reached the person" in crisis_table(result)


@pytest.mark.heavy
async def test_the_console_draws_every_open_item_of_a_growing_queue(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    binary = find_chromium()
    if binary is None:
        reason = "no chromium on PATH (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must install it", pytrace=False)
        pytest.skip(reason)
    async with pipeline(kafka_bootstrap, tmp_path, persons=0) as pipe:
        result = await measure_console(pipe, [10, 100], binary, idle_s=0.5)
    levels = result["levels"]
    assert [level["items"] for level in levels] == [10, 100]
    for level in levels:
        assert level["rows"] == level["items"]
        assert level["count_shown"] == str(level["items"])
        assert level["queue_renders_at_load"] >= 1
        assert len(level["item_views"]) == 3
        assert len(level["claims_seen_ms"]) == len(level["claims_event_ms"]) == 3
        assert level["problems"] == []
        assert level["snapshot_bytes"] > 0 and level["listing_bytes"] > 0
    # The larger queue's listing holds ten times the items.
    assert levels[1]["listing_bytes"] > 5 * levels[0]["listing_bytes"]
    assert "ratio" in console_table(result)
