"""State views that never rewind under load (coachbus.bus.state): recreation is
decided from what fetches report, not from ListOffsets, and a view never serves a
record older than one it served."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from coachbus.bus.state import PositionWatch, TableView, recreated
from coachbus.contracts.state import SafetyState

pytestmark = pytest.mark.unit

TP = TopicPartition("safety", 0)


class LaggingListOffsets:
    """A consumer whose broker answers ListOffsets far behind the records it served
    (as the embedded broker did under load: position 7, "end" 1) while the high
    watermark of its fetch responses is right."""

    def __init__(self, position: int, high: int | None, listed_end: int) -> None:
        self._position = position
        self._high = high
        self.listed_end = listed_end
        self.asked_list_offsets = 0

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def position(self, tp: TopicPartition) -> int:
        return self._position

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._high

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        self.asked_list_offsets += 1
        return {tp: self.listed_end for tp in tps}


async def test_a_lagging_list_offsets_answer_is_not_a_recreation() -> None:
    consumer = LaggingListOffsets(position=7, high=7, listed_end=1)
    assert await recreated(consumer) == []  # type: ignore[arg-type]
    assert consumer.asked_list_offsets == 0  # nobody asked the figure that lies


async def test_a_log_that_ends_before_our_position_was_recreated() -> None:
    # The embedded broker restarted empty: a fetch at 7 answers nothing, high 0.
    consumer = LaggingListOffsets(position=7, high=0, listed_end=0)
    assert await recreated(consumer) == [TP]  # type: ignore[arg-type]


async def test_a_client_that_moved_back_by_itself_saw_a_recreation() -> None:
    # Kafka answers OFFSET_OUT_OF_RANGE and the client resets to the earliest offset.
    watch = PositionWatch()
    assert await recreated(LaggingListOffsets(9, 9, 9), watch) == []  # type: ignore[arg-type]
    assert await recreated(LaggingListOffsets(0, 3, 3), watch) == [TP]  # type: ignore[arg-type]


async def test_no_fetch_yet_is_no_evidence() -> None:
    assert await recreated(LaggingListOffsets(5, None, 0)) == []  # type: ignore[arg-type]


def _state(version: int) -> bytes:
    return SafetyState(user_id="u", version=version).model_dump_json().encode()


def test_a_re_read_never_serves_an_older_record() -> None:
    view = TableView(topic="safety", model=SafetyState)
    view.apply_raw(b"u", _state(5), timestamp=500, partition=0)
    # A re-read from the beginning replays every version ever written.
    for v in range(1, 6):
        view.apply_raw(b"u", _state(v), timestamp=100 * v, partition=0)
        record = view.get("u")
        assert record is not None and record.version == 5
    assert view.stale_skipped == 4
    view.apply_raw(b"u", _state(6), timestamp=600, partition=0)
    record = view.get("u")
    assert record is not None and record.version == 6


def test_an_erase_holds_against_records_written_before_it() -> None:
    view = TableView(topic="safety", model=SafetyState)
    view.apply_raw(b"u", _state(3), timestamp=300, partition=0)
    view.apply_raw(b"u", None, timestamp=400, partition=0)  # the tombstone
    view.apply_raw(b"u", _state(3), timestamp=300, partition=0)  # re-read, late
    assert view.get("u") is None
    view.apply_raw(b"u", _state(1), timestamp=500, partition=0)  # a new start after it
    record = view.get("u")
    assert record is not None and record.version == 1
    view.erase("u")  # in band: now
    view.apply_raw(b"u", _state(2), timestamp=600, partition=0)  # written before "now"
    assert view.get("u") is None


def test_an_unreadable_record_is_not_an_erase() -> None:
    view = TableView(topic="safety", model=SafetyState)
    view.apply_raw(b"u", _state(2), timestamp=200, partition=0)
    view.apply_raw(b"u", b"{not json", timestamp=300, partition=0)
    assert view.get("u") is not None


def test_a_lost_partition_is_rebuilt_aside_and_swapped_in() -> None:
    view = TableView(topic="safety", model=SafetyState)
    view.apply_raw(b"u", _state(9), timestamp=900, partition=0)
    view.apply_raw(b"w", _state(4), timestamp=400, partition=1)
    # The broker lost partition 0 (restarted from an older snapshot, versions lower).
    view.rebuild([0])
    view.apply_raw(b"u", _state(2), timestamp=1000, partition=0)
    record = view.get("u")
    assert record is not None and record.version == 9  # readers keep theirs meanwhile
    assert view.rebuilding
    view.swap([0])
    record = view.get("u")
    assert record is not None and record.version == 2  # the broker's truth from now on
    other = view.get("w")
    assert other is not None and other.version == 4  # the other partition untouched
    assert not view.rebuilding
