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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Generic, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
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
        ends = await consumer.end_offsets(tps)
        remaining = {tp for tp in tps if ends[tp] > await consumer.position(tp)}
        out: dict[str, tuple[int, bytes | None]] = {}
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, records in batch.items():
                for rec in records:
                    key = _key(rec.key)
                    if key is not None:
                        out[key] = (tp.partition, rec.value or None)
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()


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


RECREATION_CHECK_S = 2.0


async def tail_batches(
    consumer: AIOKafkaConsumer,
) -> AsyncIterator[dict[TopicPartition, list[Any]]]:
    """Batches from an assigned consumer, forever, rewinding partitions whose topic
    was recreated under it (checked every ``RECREATION_CHECK_S``)."""
    loop = asyncio.get_running_loop()
    next_check = loop.time() + RECREATION_CHECK_S
    while True:
        if loop.time() >= next_check:
            next_check = loop.time() + RECREATION_CHECK_S
            with contextlib.suppress(KafkaError):
                await rewind_if_recreated(consumer)
        yield await consumer.getmany(timeout_ms=500)


async def rewind_if_recreated(consumer: AIOKafkaConsumer) -> list[TopicPartition]:
    """Seek to the beginning of any assigned partition whose end lies before our
    position: the topic was recreated (a memory-only broker restarted), so all it
    holds is new. Some brokers answer such a fetch with nothing rather than an
    out-of-range error, which would leave a tailing reader silent forever."""
    tps = list(consumer.assignment())
    if not tps:
        return []
    ends = await consumer.end_offsets(tps)
    behind = [tp for tp in tps if await consumer.position(tp) > ends[tp]]
    if behind:
        await consumer.seek_to_beginning(*behind)
        log.warning("partitions recreated under a reader, re-reading from the start: %s", behind)
    return behind


class TableView(Generic[S]):
    """A continuously updated read-only copy of a compacted topic (all partitions),
    fed by a :class:`ViewTail` (one per process, for all its views)."""

    def __init__(self, *, topic: str, model: type[S]) -> None:
        self.topic = topic
        self.model = model
        self._records: dict[str, S] = {}
        self.caught_up = asyncio.Event()

    def get(self, user_id: str) -> S | None:
        return self._records.get(user_id)

    def apply(self, user_id: str, record: S | None) -> None:
        if record is None:
            self._records.pop(user_id, None)
        else:
            self._records[user_id] = record

    def apply_raw(self, key: bytes | None, value: bytes | None) -> None:
        user_id = _key(key)
        if user_id is not None:
            self.apply(user_id, _parse(self.model, value, self.topic))


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
        ends = await consumer.end_offsets(tps)
        names = "+".join(sorted(self._views))
        self._task = asyncio.create_task(self._run(consumer, ends), name=f"views-{names}")

    def _caught_up(self, topics: Iterable[str]) -> None:
        for topic in topics:
            for view in self._views.get(topic, ()):
                view.caught_up.set()

    async def _run(self, consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> None:
        # A topic's views are caught up once all its partitions reached their end
        # offsets as of the start.
        behind = {tp for tp, end in ends.items() if end > 0}
        pending = set(self._views)
        done = pending - {tp.topic for tp in behind}
        self._caught_up(done)
        pending -= done
        async for batch in tail_batches(consumer):
            for tp, records in batch.items():
                views = self._views.get(tp.topic, ())
                for rec in records:
                    for view in views:
                        view.apply_raw(rec.key, rec.value)
                if tp in behind and await consumer.position(tp) >= ends[tp]:
                    behind.discard(tp)
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
        ends = await consumer.end_offsets(tps)
        remaining = set()
        for tp in tps:
            start = max(begins[tp], ends[tp] - lookback)
            consumer.seek(tp, start)
            if ends[tp] > start:
                remaining.add(tp)
        out: list[tuple[int, bytes | None, bytes | None]] = []
        while remaining:
            batch = await consumer.getmany(*remaining, timeout_ms=1000)
            for tp, records in batch.items():
                out.extend((tp.partition, r.key, r.value) for r in records)
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        return out
    finally:
        await consumer.stop()
