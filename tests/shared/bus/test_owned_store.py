"""OwnedStore in memory: what a handler gets is its own copy."""

from __future__ import annotations

from coachbus.bus.state import OwnedStore
from coachbus.contracts.state import Blackboard


async def test_get_returns_a_private_copy_of_what_was_written() -> None:
    written: list[tuple[str, bytes | None, str]] = []

    async def write(topic: str, value: bytes | None, key: str) -> None:
        written.append((topic, value, key))

    store = OwnedStore(topic="t", model=Blackboard, kafka=None, write=write)
    board = Blackboard(user_id="u1")
    board.mark_applied("turn1")
    as_written = board.model_dump_json().encode()
    await store.put("u1", board)

    first = store.get("u1")
    assert first is not None and first.applied_turns == ["turn1"]
    # A handler changes its copy (say, then fails before writing): the store and
    # the next reader must not see it.
    first.mark_applied("turn2")
    board.mark_applied("turn3")
    second = store.get("u1")
    assert second is not None and second.applied_turns == ["turn1"]
    assert second is not first
    # What went to the topic is the record as it was when put.
    assert written == [("t", as_written, "u1")]
    assert store.get("nobody") is None


async def test_erase_writes_a_tombstone_and_forgets() -> None:
    written: list[tuple[str, bytes | None, str]] = []

    async def write(topic: str, value: bytes | None, key: str) -> None:
        written.append((topic, value, key))

    store = OwnedStore(topic="t", model=Blackboard, kafka=None, write=write)
    await store.put("u1", Blackboard(user_id="u1"))
    await store.erase("u1")
    assert written[-1] == ("t", None, "u1")
    assert store.get("u1") is None and len(store) == 0
