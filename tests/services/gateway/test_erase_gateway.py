"""The gateway's erase: collapsed while pending, caches dropped by watermark, and the
review queue and turn store spare turns begun after the erase."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from coachbus.bus.erasure import Erasures
from coachbus.contracts import (
    EraseConfirmation,
    HumanReviewRequest,
    Reply,
    new_turn_id,
    turn_started_at,
)
from services.gateway.erasure import EraseDesk
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit


class FakeSettings:
    retention_ms = 7 * 86_400_000


class FakeRuntime:
    def __init__(self) -> None:
        self.erasures = Erasures(topic="erasures")
        self.settings = FakeSettings()
        self.requests: list[Any] = []
        self.published: list[tuple[str, Any]] = []
        self.tombstones: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def publish_located(self, topic: Any, event: Any, *, key: str) -> tuple[int, int]:
        await self.gate.wait()
        self.requests.append(event)
        return 1, len(self.requests) - 1

    async def publish(self, topic: Any, event: Any, *, key: str) -> None:
        self.published.append((str(topic), event))

    async def tombstone(self, topic: Any, key: str) -> None:
        self.tombstones.append(key)


def review(user: str, turn_id: str) -> HumanReviewRequest:
    return HumanReviewRequest(
        turn_id=turn_id, session_id="s", user_id=user, decision="risk_screen",
        reason="r", severity="critical", excerpt="a crisis excerpt",
    )  # fmt: skip


def reply(user: str, turn_id: str) -> Reply:
    return Reply(turn_id=turn_id, session_id="s", user_id=user, kind="coach", text="hi")


async def test_erase_is_collapsed_while_pending_and_new_once_complete() -> None:
    runtime = FakeRuntime()
    store, reviews = TurnStore(), ReviewQueue()
    desk = EraseDesk(runtime, store, reviews, owners=("shadow", "synth"))  # type: ignore[arg-type]
    runtime.gate.clear()  # the first publish is slow: the others arrive meanwhile
    calls = [asyncio.create_task(desk.erase("u")) for _ in range(3)]
    await asyncio.sleep(0)
    runtime.gate.set()
    results = await asyncio.gather(*calls)
    assert len(runtime.requests) == 1
    assert {w.request_id for w, _ in results} == {runtime.requests[0].turn_id}
    assert sorted(c for _, c in results) == [False, True, True]
    watermark = results[0][0]
    # The request dates from its watermark, so no consumer drops the request itself.
    assert turn_started_at(watermark.request_id) == watermark.erased_at
    assert runtime.requests[0].created_at == watermark.erased_at
    assert [t for t, _ in runtime.published] == ["erasures"]
    # Still pending: the same receipt again, nothing published.
    again, collapsed = await desk.erase("u")
    assert collapsed and again.request_id == watermark.request_id
    assert len(runtime.requests) == 1
    for owner in ("shadow", "synth", "synth"):  # a redelivered confirmation counts once
        desk.confirm(EraseConfirmation(user_id="u", request_id=watermark.request_id, owner=owner))
    assert desk.status(watermark)["complete"] is True
    fresh, collapsed = await desk.erase("u")
    assert not collapsed and fresh.request_id != watermark.request_id


async def test_a_watermark_drops_older_cached_turns_and_reviews_only() -> None:
    runtime = FakeRuntime()
    store, reviews = TurnStore(), ReviewQueue()
    desk = EraseDesk(runtime, store, reviews)  # type: ignore[arg-type]
    old_turn = new_turn_id()
    await store.add_reply(reply("u", old_turn))
    reviews.add(review("u", old_turn))
    await store.add_reply(reply("v", new_turn_id()))
    await asyncio.sleep(0.005)
    watermark, _ = await desk.erase("u")
    assert store.get(old_turn, "u") is None and reviews.get(old_turn) is None
    assert len(store.turns_of("v")) == 1
    # A watermark that reaches this replica late spares a turn begun after it.
    await asyncio.sleep(0.005)
    new_turn = new_turn_id()
    await store.add_reply(reply("u", new_turn))
    reviews.add(review("u", new_turn))
    later = watermark.model_copy(update={"request_id": "other"})
    runtime.erasures.note(later)
    assert store.get(new_turn, "u") is not None and reviews.get(new_turn) is not None


async def test_old_watermarks_are_tombstoned_after_retention() -> None:
    runtime = FakeRuntime()
    desk = EraseDesk(runtime, TurnStore(), ReviewQueue())  # type: ignore[arg-type]
    await desk.erase("u")
    assert await desk.sweep() == 0  # within retention: kept
    runtime.settings.retention_ms = 1
    desk = EraseDesk(runtime, TurnStore(), ReviewQueue())  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert await desk.sweep() == 1
    assert runtime.tombstones == ["u"] and runtime.erasures.get("u") is None


def test_review_drop_before_keeps_the_per_user_cap() -> None:
    q = ReviewQueue(per_user=2)
    turns = [new_turn_id() for _ in range(3)]
    for turn in turns:
        q.add(review("u", turn))
    assert q.collapsed("u") == 1  # the cap folded the oldest away
    cutoff = turn_started_at(turns[-1])
    assert cutoff is not None
    q.drop_user("u", before=cutoff + timedelta(milliseconds=1))
    assert q.pending() == [] and q.collapsed("u") == 0
