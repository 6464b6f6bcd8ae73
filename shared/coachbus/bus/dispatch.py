"""Key-ordered concurrency with at-least-once offsets.

FastStream's own options do not give what an LLM pipeline needs: ``max_workers``
either breaks per-key order or acknowledges before the work is done. The
:class:`KeyedDispatcher` sits behind a subscriber whose handler only *submits*:

* records of different keys (users) run concurrently, bounded by ``max_concurrency``;
* records of the same key run strictly in offset order;
* a partition's offset is committed only up to its lowest unfinished record, so a
  crash or rebalance redelivers exactly the work not yet done;
* the poll loop never waits for an LLM call: submitting returns at once unless
  ``max_pending`` records are already buffered (back-pressure), so long calls cannot
  trip ``max_poll_interval_ms``;
* a handler may return a *hold* (a future): the key moves on, but the record's
  offset stays uncommitted until the hold resolves. Synth uses this to keep a turn's
  inputs uncommitted until the turn is answered, so its join survives a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from coachbus.bus.pacing import FetchPacer
from coachbus.metrics import CONSUMER_LAG, INFLIGHT

log = logging.getLogger(__name__)


class Record(Protocol):
    """What we need of a consumed record (aiokafka's ConsumerRecord fits)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any


Hold = asyncio.Future[None]
# Users seen this recently count as active for fetch pacing.
ACTIVE_WINDOW_S = 1.0
# How often the pacer looks again with no record arriving (to notice idleness).
PACE_TICK_S = 0.25
# How often finished offsets are committed. A commit is a broker round trip that
# costs about what a fetch does (~0.4 ms of CPU here and as much in the embedded
# broker); at 0.05 s every busy consumer committed up to 20 times a second, about one
# commit per turn per service. Nothing waits for a commit: it only bounds what a
# crash redelivers, and a redelivered turn finds its answer (AnsweredTurns, Synth's
# answered set) instead of a second LLM call. Revocation and shutdown commit at once.
COMMIT_INTERVAL_S = 0.5
RecordHandler = Callable[[Record], Awaitable[Hold | None]]
FailureHandler = Callable[[Record, BaseException], Awaitable[None]]


@dataclass(eq=False)
class _Partition:
    tp: TopicPartition
    inflight: set[int] = field(default_factory=set)
    # Jobs queued or running (held ones excluded): what a revocation waits for.
    active: int = 0
    highest: int = -1
    committed: int = -1
    revoked: bool = False
    drained: asyncio.Event = field(default_factory=asyncio.Event)

    def commit_point(self) -> int | None:
        if self.inflight:
            return min(self.inflight)
        return self.highest + 1 if self.highest >= 0 else None


@dataclass(eq=False, slots=True)
class _Job:
    record: Record
    part: _Partition
    key: bytes


class KeyedDispatcher:
    def __init__(
        self,
        *,
        service: str,
        handle: RecordHandler,
        on_failure: FailureHandler,
        max_concurrency: int = 64,
        max_pending: int | None = None,
        attempts: int = 3,
        retry_backoff_s: float = 0.2,
        commit_interval_s: float = COMMIT_INTERVAL_S,
        drain_timeout_s: float = 30.0,
        pacer: FetchPacer | None = None,
    ) -> None:
        self.service = service
        self._handle = handle
        self._on_failure = on_failure
        self._slots = asyncio.Semaphore(max_concurrency)
        self._capacity = asyncio.Semaphore(max_pending or max_concurrency * 4)
        self._attempts = attempts
        self._retry_backoff_s = retry_backoff_s
        self._commit_interval_s = commit_interval_s
        self._drain_timeout_s = drain_timeout_s
        self._parts: dict[TopicPartition, _Partition] = {}
        self._queues: dict[bytes, deque[_Job]] = {}
        self._workers: dict[bytes, asyncio.Task[None]] = {}
        self._dirty: set[_Partition] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._committer: asyncio.Task[None] | None = None
        self._closing = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._pending_jobs = 0
        # What the pacer reads: users (keys) with work queued, running or held, and
        # users seen within the last ``ACTIVE_WINDOW_S`` (an agent that answers at
        # once has little in hand, yet polls for as many users).
        self._pending_keys: dict[bytes, int] = {}
        self._recent_keys: OrderedDict[bytes, float] = OrderedDict()
        self._pacer = pacer
        # The consumer to pace before its first record reaches us (see ``watch``).
        self._consumer_source: Callable[[], object | None] | None = None
        self._paced: object | None = None
        self._pacing: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ intake

    async def submit(self, record: Record, consumer: object | None = None) -> None:
        """Accept one record from the poll loop. Returns as soon as it is queued."""
        if self._closing:
            # Shutting down: take nothing new. Its offset is above everything tracked,
            # so it stays uncommitted and is redelivered after the restart.
            await asyncio.Event().wait()
        # FastStream's in-memory test broker hands a fake consumer without offsets;
        # only a real one (anything with highwater/commit) gets commits.
        if self._consumer is None and hasattr(consumer, "highwater"):
            self._consumer = consumer
            self._committer = asyncio.create_task(self._commit_loop(), name="coachbus-commit")
        await self._capacity.acquire()
        tp = TopicPartition(record.topic, record.partition)
        part = self._parts.get(tp)
        if part is None or part.revoked:
            part = self._parts[tp] = _Partition(tp)
        part.inflight.add(record.offset)
        part.highest = max(part.highest, record.offset)
        part.active += 1
        part.drained.clear()
        self._pending_jobs += 1
        self._idle.clear()
        INFLIGHT.labels(self.service).inc()
        # Records without a key get one of their own: they have no order to keep.
        key = record.key if record.key is not None else f"\0{tp}:{record.offset}".encode()
        self._pending_keys[key] = self._pending_keys.get(key, 0) + 1
        if self._pacer is not None:
            self._recent_keys[key] = time.monotonic()
            self._recent_keys.move_to_end(key)
        self._pace()
        queue = self._queues.setdefault(key, deque())
        queue.append(_Job(record, part, key))
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key), name="coachbus-key")

    # ------------------------------------------------------------------ work

    async def _work(self, key: bytes) -> None:
        queue = self._queues[key]
        try:
            while queue:
                job = queue.popleft()
                if job.part.revoked or self._closing:
                    # Not started, and no longer ours (or we are stopping): leave the
                    # offset uncommitted; whoever owns the partition next redoes it.
                    self._release(job, done=False)
                    continue
                async with self._slots:
                    hold = await self._run(job.record)
                if hold is None:
                    self._release(job, done=True)
                else:
                    self._capacity.release()
                    self._deactivate(job.part)
                    hold.add_done_callback(functools.partial(self._finish_held, job))
        finally:
            del self._queues[key]
            del self._workers[key]

    async def _run(self, record: Record) -> Hold | None:
        error: BaseException | None = None
        for attempt in range(1, self._attempts + 1):
            try:
                return await self._handle(record)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc
                log.warning(
                    "%s: handler failed on %s[%d]@%d (attempt %d/%d): %s",
                    self.service,
                    record.topic,
                    record.partition,
                    record.offset,
                    attempt,
                    self._attempts,
                    type(exc).__name__,
                )
                await asyncio.sleep(self._retry_backoff_s * attempt)
        assert error is not None
        # Retries spent: the record goes to the dead-letter topic with the reason, so
        # nothing is lost and the partition is not stuck behind one poisoned record.
        try:
            await self._on_failure(record, error)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Not even the dead letter could be written: leave the record uncommitted
            # (it comes back after a restart) rather than lose it, and move on.
            log.exception(
                "%s: could not dead-letter %s[%d]@%d; left uncommitted",
                self.service,
                record.topic,
                record.partition,
                record.offset,
            )
            abandoned: Hold = asyncio.get_running_loop().create_future()
            abandoned.cancel()
            return abandoned
        return None

    def _finish_held(self, job: _Job, hold: Hold) -> None:
        # A cancelled hold means the work was abandoned (revoked, stopping): keep the
        # offset uncommitted so the record is replayed.
        if not hold.cancelled():
            job.part.inflight.discard(job.record.offset)
            self._mark(job.part)
        self._job_done(job.key)

    def _release(self, job: _Job, *, done: bool) -> None:
        self._capacity.release()
        self._deactivate(job.part)
        if done:
            job.part.inflight.discard(job.record.offset)
            self._mark(job.part)
        self._job_done(job.key)

    def _deactivate(self, part: _Partition) -> None:
        part.active -= 1
        if part.active == 0:
            part.drained.set()

    def _job_done(self, key: bytes) -> None:
        self._pending_jobs -= 1
        left = self._pending_keys.get(key, 1) - 1
        if left > 0:
            self._pending_keys[key] = left
        else:
            self._pending_keys.pop(key, None)
            self._pace()
        INFLIGHT.labels(self.service).dec()
        if self._pending_jobs == 0:
            self._idle.set()

    def watch(self, consumer_source: Callable[[], object | None]) -> None:
        """Pace the consumer ``consumer_source`` returns (once it exists) even while
        no record arrives: that is when it should go idle."""
        self._consumer_source = consumer_source

    def start_pacing(self) -> None:
        if self._pacer is not None and self._pacer.enabled and self._pacing is None:
            self._pacing = asyncio.create_task(self._pace_loop(), name="coachbus-pace")

    async def _pace_loop(self) -> None:
        while True:
            await asyncio.sleep(PACE_TICK_S)
            if self._paced is None and self._consumer_source is not None:
                self._paced = self._consumer_source()
            self._pace()

    def _pace(self) -> None:
        consumer = self._consumer or self._paced
        if self._pacer is None or consumer is None:
            return
        since = time.monotonic() - ACTIVE_WINDOW_S
        recent = self._recent_keys
        while recent and next(iter(recent.values())) < since:
            recent.popitem(last=False)
        self._pacer.apply(consumer, max(len(self._pending_keys), len(recent)))

    def _mark(self, part: _Partition) -> None:
        if not part.revoked:
            self._dirty.add(part)

    # ------------------------------------------------------------------ commits

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self._commit_interval_s)
            await self.commit()

    async def commit(self, parts: list[_Partition] | None = None) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        todo = parts if parts is not None else list(self._dirty)
        if parts is None:
            self._dirty.clear()
        offsets: dict[TopicPartition, int] = {}
        for part in todo:
            point = part.commit_point()
            if point is not None and point > part.committed:
                offsets[part.tp] = point
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except (KafkaError, AssertionError, ValueError) as exc:
            # Revoked meanwhile or broker away: nothing is lost, the offsets stay where
            # they were and the work is redone by the next owner.
            log.info("%s: commit of %d partitions skipped: %s", self.service, len(offsets), exc)
            if parts is None:
                self._dirty.update(p for p in todo if not p.revoked)
            return
        for part in todo:
            if part.tp in offsets:
                part.committed = offsets[part.tp]
        self._update_lag(consumer)

    def _update_lag(self, consumer: AIOKafkaConsumer) -> None:
        by_topic: dict[str, int] = {}
        for tp, part in self._parts.items():
            if part.revoked:
                continue
            high = consumer.highwater(tp)
            if high is None:
                continue
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + max(0, high - max(part.committed, 0))
        for topic, lag in by_topic.items():
            CONSUMER_LAG.labels(self.service, topic).set(lag)

    # ------------------------------------------------------------------ rebalance / stop

    async def on_revoked(self, partitions: set[TopicPartition] | list[TopicPartition]) -> None:
        """Finish (bounded) what is running on revoked partitions, commit, forget them."""
        parts = [self._parts[tp] for tp in partitions if tp in self._parts]
        for part in parts:
            part.revoked = True
        # Drop what has not started yet; wait (bounded) for what is running.
        for queue in self._queues.values():
            for job in [j for j in queue if j.part.revoked]:
                queue.remove(job)
                self._release(job, done=False)
        await self._wait_drained(parts, self._drain_timeout_s)
        await self.commit(parts)
        for part in parts:
            if self._parts.get(part.tp) is part:
                del self._parts[part.tp]

    async def _wait_drained(self, parts: list[_Partition], timeout: float) -> None:
        waits = [p.drained.wait() for p in parts if p.active]
        if not waits:
            return
        deadline = time.monotonic() + timeout
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + timeout):
                await asyncio.gather(*waits)
        if time.monotonic() >= deadline:
            log.warning("%s: gave up waiting for in-flight work after %.0fs", self.service, timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Graceful stop: finish the work in hand (bounded), commit it, start nothing new.

        Held records (e.g. Synth's open joins) are not waited for: they stay
        uncommitted and are replayed after the restart.
        """
        self._closing = True
        running = [t for t in self._workers.values() if not t.done()]
        if running:
            _done, pending = await asyncio.wait(running, timeout=timeout or self._drain_timeout_s)
            for task in pending:
                task.cancel()
        if self._pacing is not None:
            self._pacing.cancel()
        if self._committer is not None:
            self._committer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._committer
        await self.commit(list(self._parts.values()))

    async def idle(self, timeout: float = 10.0) -> None:
        """Wait until nothing is queued, running or held (tests and benchmarks)."""
        async with asyncio.timeout(timeout):
            await self._idle.wait()

    @property
    def pending(self) -> int:
        return self._pending_jobs
