"""Per-user state kept in compacted topics.

* :class:`OwnedStore` is the single writer's view: it holds the records of the
  partitions this replica owns, loads a partition from the topic when it is
  assigned (before any input of that partition is processed) and forgets it when
  revoked. Writes go to the topic first, then to memory, so memory never holds
  what the topic does not.
* :class:`TableView` is a reader's view of a topic another service writes: it
  tails every partition from the beginning and applies tombstones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import BaseModel, ValidationError

from coachbus.settings import KafkaSettings

log = logging.getLogger(__name__)

S = TypeVar("S", bound=BaseModel)
# A view trails its writer by design (the state of an earlier turn is what a reader
# uses), so its consumer polls slowly: each fetch of a view's partitions costs the
# process and the broker ~0.3-0.4 ms of CPU whether or not a record comes, and at
# 100 ms the eight view consumers of the stack were ~80 fetches a second, idle or not.
# On the embedded broker a record then reaches the view ~60 ms (p50) after its write.
VIEW_FETCH_MAX_WAIT_MS = 250
# (topic, value, key); a value of None writes a real tombstone.
Writer = Callable[[str, bytes | None, str], Awaitable[None]]


def _key(raw: bytes | None) -> str | None:
    return raw.decode("utf-8", "replace") if raw is not None else None


class OwnedStore(Generic[S]):
    def __init__(
        self,
        *,
        topic: str,
        model: type[S],
        kafka: KafkaSettings | None,
        write: Writer,
    ) -> None:
        self.topic = topic
        self.model = model
        self._kafka = kafka
        self._write = write
        # Each record as the JSON written to (or read from) the topic: a get parses
        # a fresh copy the caller may change freely, the very value a restart would
        # load, and parsing is ~6x cheaper than a deep copy of the model.
        self._records: dict[str, bytes] = {}
        self._owner: dict[str, int] = {}
        # Erases per user: a put that sees the count change while its write was in
        # flight was overtaken by an erase (see ``put``). Bounded by users.
        self._erases: dict[str, int] = {}

    def get(self, user_id: str) -> S | None:
        raw = self._records.get(user_id)
        return self.model.model_validate_json(raw) if raw is not None else None

    async def put(self, user_id: str, record: S) -> bool:
        """Write the record; False if an erase of the user overtook the write."""
        raw = record.model_dump_json().encode()
        erases = self._erases.get(user_id, 0)
        await self._write(self.topic, raw, user_id)
        if self._erases.get(user_id, 0) != erases:
            # The user was erased while this write was in flight. Records and
            # tombstones go out through different producers, so the record may have
            # landed after the tombstone: tombstone again, now strictly after it.
            await self._write(self.topic, None, user_id)
            return False
        self._records[user_id] = raw
        return True

    async def erase(self, user_id: str) -> None:
        """Forget the user's record, then tombstone it (compaction removes it)."""
        self._erases[user_id] = self._erases.get(user_id, 0) + 1
        self.forget(user_id)
        await self._write(self.topic, None, user_id)

    def forget(self, user_id: str) -> None:
        self._records.pop(user_id, None)
        self._owner.pop(user_id, None)

    def __len__(self) -> int:
        return len(self._records)

    async def load(self, partitions: Iterable[int]) -> int:
        """Read the given partitions of the topic up to their current end."""
        wanted = sorted(set(partitions))
        if not wanted or self._kafka is None:
            return 0
        loaded = await read_latest(self._kafka, self.topic, wanted)
        for user_id, (partition, raw) in loaded.items():
            # Parsed once here so an unreadable record is treated as absent.
            if raw is None or _parse(self.model, raw, self.topic) is None:
                self._records.pop(user_id, None)
            else:
                self._records[user_id] = raw
                self._owner[user_id] = partition
        return len(loaded)

    def drop(self, partitions: Iterable[int]) -> None:
        gone = set(partitions)
        for user_id in [u for u, p in self._owner.items() if p in gone]:
            self.forget(user_id)


async def read_latest(
    kafka: KafkaSettings, topic: str, partitions: list[int] | None = None
) -> dict[str, tuple[int, bytes | None]]:
    """The latest value per key (None for a tombstone) of the given (default: all)
    partitions, read from the beginning to the end offsets taken at the start."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=kafka.fetch_max_wait_ms,
        **kafka.client_kwargs(),
    )
    await consumer.start()
    try:
        if partitions is None:
            await consumer._client.force_metadata_update()
            partitions = sorted(consumer.partitions_for_topic(topic) or ())
        tps = [TopicPartition(topic, p) for p in partitions]
        if not tps:
            return {}
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: dict[str, tuple[int, bytes | None]] = {}
        async for tp, records in read_to_end(consumer, tps):
            for rec in records:
                key = _key(rec.key)
                if key is not None:
                    out[key] = (tp.partition, rec.value or None)
        return out
    finally:
        await consumer.stop()


async def at_end(consumer: AIOKafkaConsumer, tp: TopicPartition) -> bool:
    """The reader has consumed everything the broker reported with its last fetch of
    ``tp``: its position has reached that fetch's high watermark.

    Not ListOffsets' answer (``end_offsets``): the embedded broker answers it with a
    figure far behind the records it serves (measured while 16 users chatted: a
    reader at 7 was told the end is 1 in 484 of 520 checks, while the high watermark
    of its own fetch responses said 7; bench/README.md), so a loader that stopped
    there would start a user's state from an old record. The high watermark comes
    with every fetch response, on the embedded broker and on Kafka alike."""
    high = consumer.highwater(tp)
    return high is not None and await consumer.position(tp) >= high


async def fetched_ends(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], timeout_s: float = 10.0
) -> dict[TopicPartition, int]:
    """Each partition's high watermark as a fetch reports it (positions unchanged
    where nothing was fetched yet; records a fetch brings are not kept)."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while any(consumer.highwater(tp) is None for tp in tps) and loop.time() < give_up:
        await consumer.getmany(*tps, timeout_ms=200, max_records=1)
    ends = {tp: consumer.highwater(tp) for tp in tps}
    missing = [tp for tp, end in ends.items() if end is None]
    if missing:
        # No fetch answered in time: ListOffsets' answer is all there is.
        ends.update(await consumer.end_offsets(missing))
    return {tp: int(end or 0) for tp, end in ends.items()}


async def read_to_end(
    consumer: AIOKafkaConsumer, tps: Iterable[TopicPartition], *, timeout_ms: int = 100
) -> AsyncIterator[tuple[TopicPartition, list[Any]]]:
    """Records of assigned partitions from their positions to the end the broker's
    fetch responses report (see :func:`at_end`). A short poll: an empty partition is
    known to be at its end only once a fetch answered, and a poll that brings no
    record waits its whole timeout."""
    remaining = set(tps)
    while remaining:
        batch = await consumer.getmany(*remaining, timeout_ms=timeout_ms)
        for tp, records in batch.items():
            yield tp, records
        for tp in list(remaining):
            if await at_end(consumer, tp):
                remaining.discard(tp)


def _parse(model: type[S], value: bytes | None, topic: str) -> S | None:
    if not value:  # a tombstone (None) or FastStream's encoding of None (b"")
        return None
    try:
        return model.model_validate_json(value)
    except ValidationError as exc:
        # A state record we cannot read is treated as absent rather than crashing
        # the owner; the next write replaces it.
        log.error("unreadable record in %s skipped: %s", topic, exc.errors()[:2])
        return None


async def tail_batches(
    consumer: AIOKafkaConsumer,
    on_recreated: Callable[[list[TopicPartition]], Awaitable[None]] | None = None,
) -> AsyncIterator[dict[TopicPartition, list[Any]]]:
    """Batches from an assigned consumer, forever, re-reading partitions whose topic
    was recreated under it (checked after every batch; the check asks the broker
    nothing, see :func:`recreated`). ``on_recreated`` hears of it first (a view
    rebuilds aside, see :class:`TableView`); then the partitions are read again from
    the start."""
    watch = PositionWatch()
    while True:
        batch = await consumer.getmany(timeout_ms=500)
        gone = await recreated(consumer, watch)
        if gone:
            if on_recreated is not None:
                await on_recreated(gone)
            await consumer.seek_to_beginning(*gone)
            watch.forget(gone)
            log.warning("partitions recreated under a reader, re-reading from the start: %s", gone)
            # The batch read before the seek may hold records of the recreated topic
            # from our old position: the re-read from its start delivers them again.
            batch = {tp: recs for tp, recs in batch.items() if tp not in gone}
        yield batch


class PositionWatch:
    """Each partition's last position, to notice a client that reset it by itself
    (Kafka answers a fetch beyond a recreated log's end with OFFSET_OUT_OF_RANGE, and
    the consumer's ``auto_offset_reset`` moves back without telling us)."""

    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.positions.pop(tp, None)


async def recreated(
    consumer: AIOKafkaConsumer, watch: PositionWatch | None = None
) -> list[TopicPartition]:
    """Assigned partitions whose log now ends before our position, or whose position
    the client moved back: the topic was recreated (a memory-only broker restarted),
    so all it holds is new.

    Evidence the brokers report truthfully, and no request: the high watermark of the
    last fetch response (a live log never ends before an offset we have read; the
    embedded broker answers a fetch beyond a recreated log with nothing and that
    watermark, Kafka with OFFSET_OUT_OF_RANGE, which the client turns into a reset
    we see as a position that went back). ListOffsets is not asked: the embedded
    broker answers it with a figure far behind the records it serves, which made a
    live topic look recreated hundreds of times an hour (see :func:`at_end`).

    What no client can see: a log recreated and then written past our old position
    before our next fetch. That needs a restart and more records than a partition
    had, between two fetches a fraction of a second apart."""
    out: list[TopicPartition] = []
    for tp in consumer.assignment():
        position = await consumer.position(tp)
        high = consumer.highwater(tp)
        before = watch.positions.get(tp) if watch is not None else None
        if (high is not None and high < position) or (before is not None and position < before):
            out.append(tp)
        elif watch is not None:
            watch.positions[tp] = position
    return out


class TableView(Generic[S]):
    """A continuously updated read-only copy of a compacted topic (all partitions),
    fed by a :class:`ViewTail` (one per process, for all its views).

    **It never goes back in time.** A record older than the one it holds for a key is
    not applied: for per-user state records (``version``, which their one writer
    raises on every turn) the version decides, otherwise the record's timestamp; a
    tombstone (an erase) also remembers its timestamp, so no record written before
    the erase comes back in a re-read. When the broker really did lose a topic (a
    memory-only broker restarted), the view rebuilds those partitions aside and
    swaps the rebuilt records in once it has read them to the end
    (:meth:`rebuild`, :meth:`swap`); until then readers keep the records they had."""

    def __init__(self, *, topic: str, model: type[S]) -> None:
        self.topic = topic
        self.model = model
        self._records: dict[str, S] = {}
        # key -> (version or -1, timestamp ms) of the record held, and the partition
        # it came from (for a rebuild of that partition).
        self._marks: dict[str, tuple[int, int]] = {}
        self._partition: dict[str, int] = {}
        # key -> timestamp of its last tombstone (bounded by the users erased).
        self._erased: dict[str, int] = {}
        # partition -> the records rebuilt so far, while a rebuild runs.
        self._rebuilding: dict[int, dict[str, tuple[S | None, int, int]]] = {}
        self.caught_up = asyncio.Event()
        # Records not applied because an older one came after a newer (a re-read).
        self.stale_skipped = 0

    def get(self, user_id: str) -> S | None:
        return self._records.get(user_id)

    def apply(
        self, user_id: str, record: S | None, *, timestamp: int = 0, partition: int = -1
    ) -> None:
        if partition in self._rebuilding:
            self._rebuilding[partition][user_id] = (record, _version(record), timestamp)
            return
        if not self._newer(user_id, record, timestamp):
            self.stale_skipped += 1
            return
        self._set(user_id, record, _version(record), timestamp, partition)

    def erase(self, user_id: str) -> None:
        """Forget the user now (an erase seen in band): any record of theirs written
        before this moment, arriving late or in a re-read, stays out."""
        self._set(user_id, None, -1, int(time.time() * 1000), -1)

    def _newer(self, user_id: str, record: S | None, timestamp: int) -> bool:
        erased = self._erased.get(user_id)
        held = self._marks.get(user_id)
        if record is None:
            return held is None or timestamp >= held[1]
        if erased is not None and timestamp < erased:
            return False  # written before the user's erase
        if held is None:
            return True
        version = _version(record)
        if version >= 0 and held[0] >= 0:
            return version > held[0] or (version == held[0] and timestamp >= held[1])
        return timestamp >= held[1]

    def _set(
        self, user_id: str, record: S | None, version: int, timestamp: int, partition: int
    ) -> None:
        if record is None:
            self._records.pop(user_id, None)
            self._marks.pop(user_id, None)
            self._partition.pop(user_id, None)
            self._erased[user_id] = max(timestamp, self._erased.get(user_id, timestamp))
            return
        self._records[user_id] = record
        self._marks[user_id] = (version, timestamp)
        self._partition[user_id] = partition

    def apply_raw(
        self, key: bytes | None, value: bytes | None, *, timestamp: int = 0, partition: int = -1
    ) -> None:
        user_id = _key(key)
        if user_id is not None:
            record = _parse(self.model, value, self.topic)
            if record is None and value:
                return  # unreadable: treated as absent, never as an erase
            self.apply(user_id, record, timestamp=timestamp, partition=partition)

    def rebuild(self, partitions: Iterable[int]) -> None:
        """The broker lost these partitions: read them again aside, keep serving."""
        for p in partitions:
            self._rebuilding[p] = {}

    def swap(self, partitions: Iterable[int]) -> None:
        """The rebuilt partitions were read to their end: they replace what was held."""
        for p in partitions:
            rebuilt = self._rebuilding.pop(p, None)
            if rebuilt is None:
                continue
            for user_id in [u for u, q in self._partition.items() if q == p]:
                self._records.pop(user_id, None)
                self._marks.pop(user_id, None)
                self._partition.pop(user_id, None)
            for user_id, (record, version, timestamp) in rebuilt.items():
                if record is not None:
                    self._set(user_id, record, version, timestamp, p)

    @property
    def rebuilding(self) -> bool:
        return bool(self._rebuilding)


def _version(record: BaseModel | None) -> int:
    version = getattr(record, "version", None)
    return version if isinstance(version, int) else -1


class ViewTail:
    """One consumer that tails the topics of several views. Every consumer costs a
    fetch loop in the client and in the broker whether or not anything arrives; a
    process with three views reads them through one."""

    def __init__(self, views: Iterable[TableView[Any]], kafka: KafkaSettings | None) -> None:
        self._views: dict[str, list[TableView[Any]]] = {}
        for view in views:
            self._views.setdefault(view.topic, []).append(view)
        self._kafka = kafka
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._rebuilding: set[TopicPartition] = set()

    async def start(self) -> None:
        if self._kafka is None or not self._views:
            self._caught_up(self._views)
            return
        kafka = self._kafka
        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=VIEW_FETCH_MAX_WAIT_MS,
            **kafka.client_kwargs(),
        )
        await consumer.start()
        tps: list[TopicPartition] = []
        for topic in sorted(self._views):
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(topic) or set()
            tps.extend(TopicPartition(topic, p) for p in sorted(parts))
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        names = "+".join(sorted(self._views))
        self._task = asyncio.create_task(self._run(consumer, tps), name=f"views-{names}")

    def _caught_up(self, topics: Iterable[str]) -> None:
        for topic in topics:
            for view in self._views.get(topic, ()):
                view.caught_up.set()

    async def _recreated(self, gone: list[TopicPartition]) -> None:
        # The broker lost them: each view rebuilds them aside, readers keep theirs.
        for tp in gone:
            for view in self._views.get(tp.topic, ()):
                view.rebuild([tp.partition])
        self._rebuilding.update(gone)

    async def _run(self, consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> None:
        # A topic's views are caught up once all its partitions reached the end the
        # broker's fetches report (coachbus.bus.state.at_end).
        behind = set(tps)
        pending = set(self._views)
        async for batch in tail_batches(consumer, self._recreated):
            for tp, records in batch.items():
                views = self._views.get(tp.topic, ())
                for rec in records:
                    for view in views:
                        view.apply_raw(
                            rec.key, rec.value, timestamp=rec.timestamp, partition=tp.partition
                        )
            for tp in [tp for tp in behind | self._rebuilding if await at_end(consumer, tp)]:
                behind.discard(tp)
                if tp in self._rebuilding:
                    self._rebuilding.discard(tp)
                    for view in self._views.get(tp.topic, ()):
                        view.swap([tp.partition])
            if pending:
                done = pending - {tp.topic for tp in behind}
                self._caught_up(done)
                pending -= done

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None


async def read_tail(
    kafka: KafkaSettings, topic: str, partitions: list[int], lookback: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """The last ``lookback`` records of each partition, as (partition, key, value)."""
    if not partitions:
        return []
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka.servers,
        enable_auto_commit=False,
        fetch_max_wait_ms=kafka.fetch_max_wait_ms,
        **kafka.client_kwargs(),
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        begins = await consumer.beginning_offsets(tps)
        # Where the tail starts: the end the broker reports with a fetch (ListOffsets
        # may answer behind it, see at_end), found by one fetch at the beginning.
        await consumer.seek_to_beginning(*tps)
        ends = await fetched_ends(consumer, tps)
        for tp in tps:
            consumer.seek(tp, max(begins[tp], ends[tp] - lookback))
        out: list[tuple[int, bytes | None, bytes | None]] = []
        async for tp, records in read_to_end(consumer, tps):
            out.extend((tp.partition, r.key, r.value) for r in records)
        return out
    finally:
        await consumer.stop()
