"""The erase watermark filter: what every consumer drops, and why."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from coachbus.bus.erasure import Erasures, origin, raw_origin
from coachbus.bus.state import OwnedStore
from coachbus.contracts import EraseWatermark, new_turn_id, turn_started_at
from coachbus.contracts.state import Blackboard

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def watermark(user: str, at: datetime, request: str = "r1") -> EraseWatermark:
    return EraseWatermark(
        user_id=user, request_id=request, erased_at=at, partition=0, offset=7, owners=["synth"]
    )


def record(turn_id: str, created_at: datetime, user: str = "u") -> bytes:
    body = {"turn_id": turn_id, "user_id": user, "created_at": created_at.isoformat()}
    return json.dumps(body).encode()


def test_turn_ids_are_time_ordered_and_tell_their_start() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    turn = new_turn_id()
    started = turn_started_at(turn)
    assert started is not None and before <= started <= datetime.now(UTC)
    assert len(turn) == 32 and turn != new_turn_id()
    # Ids of another shape (tests, old uuid4 ids) have no start to tell.
    assert turn_started_at("t1") is None
    assert turn_started_at("0" * 12 + "4" + "0" * 19) is None


def test_origin_is_the_turns_start_else_the_records_own_time() -> None:
    turn = new_turn_id()
    late = datetime.now(UTC) + timedelta(hours=1)
    # A result made an hour after its turn began still dates from the turn.
    assert origin(turn, late) == turn_started_at(turn)
    assert origin("t1", T0) == T0
    assert origin("t1", "2026-01-01T12:00:00+00:00") == T0
    assert origin("t1", "not a date") is None
    assert raw_origin(record("t1", T0)) == T0
    assert raw_origin(b"\xff not json") is None
    assert raw_origin(None) is None


def test_drops_only_records_of_the_erased_user_from_before_the_erase() -> None:
    erasures = Erasures(topic="erasures")
    erasures.note(watermark("u", T0))
    before, after = T0 - timedelta(seconds=1), T0 + timedelta(seconds=1)
    assert erasures.drops(b"u", record("t1", before))
    assert not erasures.drops(b"u", record("t2", after))
    # The erase request itself dates from the watermark: never dropped.
    assert not erasures.drops(b"u", record("t3", T0))
    assert not erasures.drops(b"other", record("t4", before, user="other"))
    assert not erasures.drops(None, record("t5", before))
    # A record of an erased user whose age cannot be told is not kept.
    assert erasures.drops(b"u", b"garbage")


def test_a_later_watermark_wins_and_an_earlier_one_never_lowers_it() -> None:
    erasures = Erasures(topic="erasures")
    raised: list[str] = []
    erasures.listeners.append(lambda w: raised.append(w.request_id))
    erasures.note(watermark("u", T0, "r1"))
    erasures.note(watermark("u", T0 + timedelta(seconds=5), "r2"))
    erasures.note(watermark("u", T0 + timedelta(seconds=2), "r-late"))  # a slower replica
    assert erasures.erased_at("u") == T0 + timedelta(seconds=5)
    erasures.note(watermark("u", T0 + timedelta(seconds=5), "r2"))  # re-read on restart
    assert raised == ["r1", "r2"]


def test_the_topic_feeds_it_and_a_tombstone_lifts_it() -> None:
    erasures = Erasures(topic="erasures")
    erasures.apply_raw(b"u", watermark("u", T0).model_dump_json().encode())
    assert erasures.erased_at("u") == T0
    erasures.apply_raw(b"v", watermark("u", T0).model_dump_json().encode())  # wrong key
    erasures.apply_raw(b"w", b"{not json")
    assert erasures.erased_at("v") is None and erasures.erased_at("w") is None
    assert [w.user_id for w in erasures.older_than(T0 + timedelta(days=8))] == ["u"]
    erasures.apply_raw(b"u", None)
    assert erasures.erased_at("u") is None and len(erasures) == 0


async def test_a_write_an_erase_overtakes_is_tombstoned_again() -> None:
    """Synth finalising a turn while the erase arrives: its memory write and the
    tombstone go out through different producers and may land in either order."""
    written: list[bytes | None] = []
    release = asyncio.Event()

    async def write(topic: str, value: bytes | None, key: str) -> None:
        if value is not None:
            await release.wait()  # the record's write is slow
        written.append(value)

    store = OwnedStore(topic="memory", model=Blackboard, kafka=None, write=write)
    put = asyncio.create_task(store.put("u", Blackboard(user_id="u")))
    await asyncio.sleep(0)
    await store.erase("u")
    release.set()
    assert await put is False
    # Whatever order the broker kept, the last word is a tombstone, and nothing is held.
    assert written[-1] is None and written.count(None) == 2
    assert store.get("u") is None
    # A write after the erase (a new turn) is an ordinary write.
    assert await store.put("u", Blackboard(user_id="u")) is True
    assert store.get("u") is not None
