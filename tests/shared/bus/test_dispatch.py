"""Key-ordered dispatch: order per key, concurrency across keys, commit points."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest
from aiokafka import TopicPartition

from coachbus.bus.dispatch import KeyedDispatcher, Record

pytestmark = pytest.mark.unit


@dataclass
class Rec:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None = b"{}"
    headers: list[tuple[str, bytes]] = field(default_factory=list)


class FakeConsumer:
    def __init__(self) -> None:
        self.commits: list[dict[TopicPartition, int]] = []

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    def committed_point(self, tp: TopicPartition) -> int | None:
        points = [c[tp] for c in self.commits if tp in c]
        return points[-1] if points else None


async def _fail(record: Record, exc: BaseException) -> None:
    raise AssertionError(f"unexpected failure: {exc}")


async def test_same_key_in_order_different_keys_concurrent() -> None:
    seen: dict[bytes, list[int]] = {}
    running = 0
    peak = 0

    async def handle(record: Record) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(random.uniform(0, 0.01))
        assert record.key is not None
        seen.setdefault(record.key, []).append(record.offset)
        running -= 1
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, max_concurrency=8)
    consumer = FakeConsumer()
    for offset in range(200):
        await d.submit(Rec("in", 0, offset, f"user{offset % 20}".encode()), consumer)
    await d.idle()
    await d.commit()
    for key, offsets in seen.items():
        assert offsets == sorted(offsets), key
    assert sum(len(v) for v in seen.values()) == 200
    assert 1 < peak <= 8
    assert consumer.committed_point(TopicPartition("in", 0)) == 200


async def test_commit_stops_at_lowest_unfinished_offset() -> None:
    gate = asyncio.Event()

    async def handle(record: Record) -> None:
        if record.offset == 1:
            await gate.wait()
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, commit_interval_s=3600)
    consumer = FakeConsumer()
    for offset in range(5):
        await d.submit(Rec("in", 0, offset, f"k{offset}".encode()), consumer)
    await asyncio.sleep(0.05)
    await d.commit()
    # 0 is done, 1 is stuck, 2..4 are done: only offset 1 may be committed (next to read).
    assert consumer.committed_point(TopicPartition("in", 0)) == 1
    gate.set()
    await d.idle()
    await d.commit()
    assert consumer.committed_point(TopicPartition("in", 0)) == 5


async def test_slow_key_does_not_block_other_keys() -> None:
    gate = asyncio.Event()
    done: list[bytes] = []

    async def handle(record: Record) -> None:
        if record.key == b"slow":
            await gate.wait()
        assert record.key is not None
        done.append(record.key)
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, max_concurrency=4)
    await d.submit(Rec("in", 0, 0, b"slow"), None)
    for i in range(1, 10):
        await d.submit(Rec("in", 0, i, f"fast{i}".encode()), None)
    await asyncio.sleep(0.05)
    assert len(done) == 9
    assert b"slow" not in done
    gate.set()
    await d.idle()
    assert done[-1] == b"slow"


async def test_failing_handler_is_retried_then_dead_lettered() -> None:
    calls = 0
    failed: list[tuple[int, str]] = []

    async def handle(record: Record) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    async def on_failure(record: Record, exc: BaseException) -> None:
        failed.append((record.offset, str(exc)))

    d = KeyedDispatcher(
        service="t", handle=handle, on_failure=on_failure, attempts=3, retry_backoff_s=0
    )
    consumer = FakeConsumer()
    await d.submit(Rec("in", 0, 7, b"k"), consumer)
    await d.idle()
    await d.commit()
    assert calls == 3
    assert failed == [(7, "boom")]
    # Dead-lettered means handled: the partition moves on.
    assert consumer.committed_point(TopicPartition("in", 0)) == 8


async def test_held_record_keeps_offset_until_released() -> None:
    holds: list[asyncio.Future[None]] = []

    async def handle(record: Record) -> asyncio.Future[None] | None:
        if record.offset == 0:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            holds.append(fut)
            return fut
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, commit_interval_s=3600)
    consumer = FakeConsumer()
    for offset in range(3):
        await d.submit(Rec("in", 0, offset, b"same-key"), consumer)
    await asyncio.sleep(0.05)
    await d.commit()
    # The key moved on past the hold (1 and 2 ran), but nothing is committed past 0.
    assert consumer.committed_point(TopicPartition("in", 0)) in (None, 0)
    holds[0].set_result(None)
    await d.idle()
    await d.commit()
    assert consumer.committed_point(TopicPartition("in", 0)) == 3


async def test_cancelled_hold_is_not_committed() -> None:
    async def handle(record: Record) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(fut.cancel)
        return fut

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, commit_interval_s=3600)
    consumer = FakeConsumer()
    await d.submit(Rec("in", 0, 0, b"k"), consumer)
    await d.idle()
    await d.commit()
    assert consumer.committed_point(TopicPartition("in", 0)) is None


async def test_revocation_waits_for_running_and_drops_queued() -> None:
    started = asyncio.Event()
    release = asyncio.Event()
    ran: list[int] = []

    async def handle(record: Record) -> None:
        started.set()
        await release.wait()
        ran.append(record.offset)
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, commit_interval_s=3600)
    consumer = FakeConsumer()
    for offset in range(3):
        await d.submit(Rec("in", 0, offset, b"k"), consumer)
    await started.wait()
    revoke = asyncio.create_task(d.on_revoked({TopicPartition("in", 0)}))
    await asyncio.sleep(0.02)
    assert not revoke.done()  # waits for the running record
    release.set()
    await revoke
    assert ran == [0]
    # Offset 0 finished, 1 and 2 were never started: the next owner starts at 1.
    assert consumer.committed_point(TopicPartition("in", 0)) == 1


async def test_close_finishes_work_in_hand() -> None:
    finished: list[int] = []

    async def handle(record: Record) -> None:
        await asyncio.sleep(0.05)
        finished.append(record.offset)
        return None

    d = KeyedDispatcher(service="t", handle=handle, on_failure=_fail, commit_interval_s=3600)
    consumer = FakeConsumer()
    await d.submit(Rec("in", 0, 0, b"a"), consumer)
    await d.submit(Rec("in", 0, 1, b"b"), consumer)
    await asyncio.sleep(0.01)
    await d.close(timeout=5)
    assert sorted(finished) == [0, 1]
    assert consumer.committed_point(TopicPartition("in", 0)) == 2
