"""A reader tailing a state topic under a steady write load, over the real broker:
it never rewinds (the embedded broker's ListOffsets answers behind the records it
serves) and never observes an older record for a key than one it already saw."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import AIOKafkaProducer

from coachbus.bus.admin import ensure_topics
from coachbus.bus.state import TableView, ViewTail, read_latest
from coachbus.contracts.state import SafetyState
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic

pytestmark = pytest.mark.broker

USERS = 8
# Several of the old check periods (2 s) and beyond the view's 250 ms fetch wait.
SECONDS = 6.0


async def test_a_tailing_view_never_rewinds_nor_goes_back_under_load(
    kafka_bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    await ensure_topics(settings, kafka)
    topic = settings.topic(Topic.SAFETY.value)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=0)
    await producer.start()
    view = TableView(topic=topic, model=SafetyState)
    tail = ViewTail([view], kafka)
    written = dict.fromkeys(range(USERS), 0)
    seen: dict[str, int] = {}
    went_back: list[tuple[str, int, int]] = []
    stop = asyncio.Event()

    async def write() -> None:
        # One writer per user, every version in order, as Stability writes.
        while not stop.is_set():
            for u in range(USERS):
                written[u] += 1
                record = SafetyState(user_id=f"u{u}", version=written[u], turn_count=written[u])
                await producer.send(topic, record.model_dump_json().encode(), key=f"u{u}".encode())
            await asyncio.sleep(0.01)

    async def watch() -> None:
        while not stop.is_set():
            for u in range(USERS):
                record = view.get(f"u{u}")
                if record is None:
                    continue
                last = seen.get(record.user_id, 0)
                if record.version < last:
                    went_back.append((record.user_id, last, record.version))
                seen[record.user_id] = max(last, record.version)
            await asyncio.sleep(0.002)

    caplog.set_level(logging.WARNING, logger="coachbus.bus.state")
    try:
        await tail.start()
        async with asyncio.timeout(15):
            await view.caught_up.wait()
        tasks = [asyncio.create_task(write()), asyncio.create_task(watch())]
        await asyncio.sleep(SECONDS)
        stop.set()
        await asyncio.gather(*tasks)
        await producer.flush()
        # The view follows to the last version of every user.
        async with asyncio.timeout(15):
            while any(
                (r := view.get(f"u{u}")) is None or r.version < written[u] for u in range(USERS)
            ):
                await asyncio.sleep(0.05)
        # A loader reading the topic to its end gets the same last versions.
        latest = await read_latest(kafka, topic)
        for u in range(USERS):
            loaded = SafetyState.model_validate_json(latest[f"u{u}"][1] or b"")
            assert loaded.version == written[u]
    finally:
        stop.set()
        await tail.stop()
        await producer.stop()
    assert sum(written.values()) > USERS * 50  # a steady load, not a trickle
    assert went_back == []
    assert "recreated" not in caplog.text
    assert view.stale_skipped == 0  # nothing was re-read at all
