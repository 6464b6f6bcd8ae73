"""Synth's join: complete, deadline, duplicates, replay, revocation, erasure."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from coachbus.contracts import CoachResult, UserMessage
from coachbus.contracts.payloads import CoachPayload
from services.synth.join import Join, OpenTurn

pytestmark = pytest.mark.unit


def _message(turn: str, deadline_s: float = 5.0, user: str = "u") -> UserMessage:
    msg = UserMessage.create(
        user_id=user,
        session_id="s",
        text="hi",
        deadline_ms=1000,
        max_tokens=1,
        wall_clock_ms=1000,
        turn_id=turn,
    )
    return msg.model_copy(update={"deadline_at": datetime.now(UTC) + timedelta(seconds=deadline_s)})


def _coach(turn: str, user: str = "u") -> CoachResult:
    return CoachResult(
        turn_id=turn,
        session_id="s",
        user_id=user,
        tier="deterministic",
        latency_ms=1,
        payload=CoachPayload(text="ok", language="en", crisis_mode=False, grounded_on=[]),
    )


class Recorder:
    def __init__(self) -> None:
        self.finals: list[tuple[str, bool, list[str]]] = []

    async def __call__(self, turn: OpenTurn, degraded: bool) -> None:
        self.finals.append((turn.turn_id, degraded, turn.missing(["coach"])))


async def test_completes_when_all_required_reported() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec)
    h1 = join.add_message(_message("t1"), 0)
    h2 = join.add_result(_coach("t1"), 0)
    assert h1 is not None and h2 is not None
    await asyncio.wait_for(asyncio.gather(h1, h2), 1)
    assert rec.finals == [("t1", False, [])]
    assert join.is_done("t1")
    # A late duplicate is recognised and not held.
    assert join.add_result(_coach("t1"), 0) is None


async def test_result_before_message_still_joins() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec)
    h = join.add_result(_coach("t2"), 1)
    assert rec.finals == []
    join.add_message(_message("t2"), 1)
    assert h is not None
    await asyncio.wait_for(h, 1)
    assert rec.finals == [("t2", False, [])]


async def test_deadline_finalizes_degraded() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec)
    h = join.add_message(_message("t3", deadline_s=0.05), 0)
    assert h is not None
    await asyncio.wait_for(h, 1)
    assert rec.finals == [("t3", True, ["coach"])]


async def test_duplicate_message_is_not_held_twice() -> None:
    join = Join(required=["coach"], finalize=Recorder())
    assert join.add_message(_message("t4"), 0) is not None
    assert join.add_message(_message("t4"), 0) is None


async def test_replayed_turn_past_deadline_waits_for_grace() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec, replay_grace_s=0.1)
    h = join.add_message(_message("t5", deadline_s=-30), 0)
    await asyncio.sleep(0.02)
    join.add_result(_coach("t5"), 0)  # replayed from the other topic within the grace
    assert h is not None
    await asyncio.wait_for(h, 1)
    assert rec.finals == [("t5", False, [])]


async def test_revoked_partition_abandons_open_turns() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec)
    h = join.add_message(_message("t6"), 2)
    assert join.abandon({2}) == 1
    assert h is not None and h.cancelled()  # stays uncommitted for the next owner
    assert rec.finals == []


async def test_erasure_drops_open_turns_of_the_user() -> None:
    rec = Recorder()
    join = Join(required=["coach"], finalize=rec)
    h = join.add_message(_message("t7", user="gone"), 0)
    other = join.add_message(_message("t8", user="stays"), 0)
    assert join.forget_user("gone") == 1
    assert h is not None and h.done() and not h.cancelled()
    assert other is not None and not other.done()


async def test_failed_finalize_is_retried() -> None:
    calls = 0

    async def flaky(turn: OpenTurn, degraded: bool) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("broker away")

    join = Join(required=["coach"], finalize=flaky)
    h = join.add_message(_message("t9"), 0)
    join.add_result(_coach("t9"), 0)
    assert h is not None
    await asyncio.wait_for(h, 3)
    assert calls == 2
