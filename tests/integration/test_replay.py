"""``coachbus replay`` over the embedded broker, with the simulator as the candidate."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import pytest_asyncio

from coachbus.llm.sim import SimConfig
from coachbus.replay import assemble, guard, main, save
from tests.shared.llm.simserver import serve_in_background

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "replay.schema.json").read_text("utf-8")
)


def _message(user: str, n: int, text: str, at: datetime) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "turn_id": f"rec-{user}-{n}",
        "session_id": f"{user}-s",
        "user_id": user,
        "created_at": at.isoformat(),
        "text": text,
        "language": "en",
        "address": None,
    }


def _stability(turn: str, user: str, crisis: str) -> dict[str, Any]:
    return {
        "turn_id": turn,
        "user_id": user,
        "tier": "deterministic",
        "payload": {"crisis": {"category": crisis, "uncertain": False}, "blocked_steps": []},
    }


def _recording(user: str) -> list[tuple[str, dict[str, Any]]]:
    t0 = datetime.now(UTC) - timedelta(hours=1)
    texts = [
        "I want to run three times a week this month.",
        "Skipped my run again, scrolled on my phone instead.",
        # Production caught a crisis here: a candidate must catch it too.
        "I went for a short walk today and it felt fine.",
    ]
    lines: list[tuple[str, dict[str, Any]]] = []
    for n, text in enumerate(texts):
        msg = _message(user, n, text, t0 + timedelta(minutes=n))
        lines.append(("user-messages", msg))
        crisis = "suicidal_ideation" if n == 2 else "none"
        lines.append(("agent.stability", _stability(msg["turn_id"], user, crisis)))
        lines.append(("replies", {"turn_id": msg["turn_id"], "kind": "final", "text": "ok"}))
    # An erased user's turns are never replayed.
    gone = _message("gone", 0, "my private words", t0)
    lines.append(("user-messages", gone))
    lines.append(("erasures", {"user_id": "gone", "erased_at": (t0 + timedelta(1)).isoformat()}))
    return lines


def test_assemble_filters_users_time_limit_and_erased() -> None:
    lines = _recording("ann")
    turns = assemble(lines)
    assert [t.turn_id for t in turns] == ["rec-ann-0", "rec-ann-1", "rec-ann-2"]
    assert "gone" not in {t.user_id for t in turns}
    assert [t.turn_id for t in assemble(lines, limit=1)] == ["rec-ann-0"]
    assert assemble(lines, users=["nobody"]) == []
    assert turns[2].results["stability"]["payload"]["crisis"]["category"] == "suicidal_ideation"


def test_guard_names_missed_crises_and_leaks() -> None:
    turns = [
        {"turn_id": "a", "crisis": {"missed": True}, "leaked_steps": []},
        {"turn_id": "b", "crisis": {"missed": False}, "leaked_steps": ["all_savings"]},
        {"turn_id": "c", "crisis": {"missed": False}, "leaked_steps": []},
    ]
    assert guard(turns) == {"missed_crisis": ["a"], "leaked_steps": ["b"]}


@pytest_asyncio.fixture
async def llm() -> AsyncIterator[str]:
    """The candidate model: the simulator, instant, served from this test's loop (the
    replay runs in a thread). ``--llm sim`` would start one at 80 tokens/s per
    sandbox, and the test asks what the harness does, not how fast a model writes."""
    async with serve_in_background(SimConfig(ttft_ms=5, tokens_per_s=0)) as url:
        yield url


async def test_replay_from_a_file_then_from_its_sandbox_topics(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], llm: str
) -> None:
    user = f"ann{uuid.uuid4().hex[:6]}"
    recording = tmp_path / "recording.jsonl"
    save(_recording(user), recording)
    first = f"rp{uuid.uuid4().hex[:8]}."
    argv = [
        "--from-file",
        str(recording),
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
