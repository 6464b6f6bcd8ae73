"""``coachbus replay`` over the embedded broker, with the simulator as the candidate."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema
import pytest
import pytest_asyncio

from coachbus.llm.sim import SimConfig
from coachbus.replay.command import main
from coachbus.replay.record import save
from tests.fixtures.recording import recording
from tests.shared.llm.simserver import serve_in_background

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "replay.schema.json").read_text("utf-8")
)


@pytest_asyncio.fixture
async def llm() -> AsyncIterator[str]:
    """The candidate model: the simulator, instant, served from this test's loop (the
    replay runs in a thread). ``--llm sim`` would start one at 80 tokens/s per
    sandbox, and the test asks what the harness does, not how fast a model writes."""
    async with serve_in_background(SimConfig(ttft_ms=5, tokens_per_s=0)) as url:
        yield url


@pytest.mark.heavy
async def test_replay_from_a_file_then_from_its_sandbox_topics(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], llm: str
) -> None:
    user = f"ann{uuid.uuid4().hex[:6]}"
    saved = tmp_path / "recording.jsonl"
    save(recording(user), saved)
    first = f"rp{uuid.uuid4().hex[:8]}."
    argv = [
        "--from-file",
        str(saved),
        "--out",
        str(tmp_path / "one"),
        "--sandbox-bootstrap",
        kafka_bootstrap,
        "--sandbox-prefix",
        first,
        "--llm-base-url",
        llm,
        "--turn-deadline-ms",
        "8000",
        "--turn-timeout",
        "60",
    ]
    code = await asyncio.to_thread(main, argv)
    # The recorded crisis on an ordinary walk is "missed" by the candidate: the
    # guard fails the run and names the turn.
    assert code == 1
    assert f"rec-{user}-2" in capsys.readouterr().err
    diff = json.loads((tmp_path / "one" / "diff.json").read_text("utf-8"))
    jsonschema.validate(diff, SCHEMA)
    assert diff["totals"]["turns"] == 3 and diff["totals"]["answered"] == 3
    assert diff["guard"]["missed_crisis"] == [f"rec-{user}-2"]
    assert all(t["user_id"] == user for t in diff["turns"])
    html = (tmp_path / "one" / "report.html").read_text("utf-8")
    assert "MISSED CRISIS" in html and "<del>" in html

    # The checkpoint: a second run on the same folder replays nothing again.
    again = await asyncio.to_thread(main, argv)
    assert again == 1  # same verdict, read from the checkpoint
    assert "replayed 3 turns" in capsys.readouterr().out

    # The first sandbox's own topics as the recording: the same code gives the same
    # decisions (the harness itself moves nothing), and the guard passes.
    second = [
        "--from-topic",
        "--bootstrap",
        kafka_bootstrap,
        "--source-prefix",
        first,
        "--out",
        str(tmp_path / "two"),
        "--sandbox-bootstrap",
        kafka_bootstrap,
        "--llm-base-url",
        llm,
        "--turn-deadline-ms",
        "8000",
        "--turn-timeout",
        "60",
    ]
    assert await asyncio.to_thread(main, second) == 0
    diff2 = json.loads((tmp_path / "two" / "diff.json").read_text("utf-8"))
    jsonschema.validate(diff2, SCHEMA)
    assert diff2["totals"]["turns"] == 3
    assert diff2["totals"]["crisis_changed"] == 0
    assert diff2["totals"]["blocked_steps_changed"] == 0
