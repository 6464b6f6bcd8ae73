"""The bus runtime over a real broker: topics, dead-lettering, state reload."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from faststream.kafka import KafkaRouter

from coachbus.bus.admin import ensure_topics
from coachbus.bus.service import AgentRuntime
from coachbus.bus.state import read_latest
from coachbus.contracts import UserMessage
from coachbus.contracts.state import Blackboard
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic

pytestmark = pytest.mark.broker


def _settings(prefix: str) -> tuple[CoachbusSettings, KafkaSettings]:
    return CoachbusSettings(topic_prefix=prefix, partitions=3), KafkaSettings(
        bootstrap_servers=None
    )


async def _read_all(bootstrap: str, topic: str, expect: int, timeout: float = 15) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5
    )
    await consumer.start()
    out: list[bytes] = []
    try:
        async with asyncio.timeout(timeout):
            while len(out) < expect:
                batch = await consumer.getmany(timeout_ms=200)
                out.extend(r.value for rs in batch.values() for r in rs if r.value is not None)
    finally:
        await consumer.stop()
    return out


async def test_topics_created_idempotently(kafka_bootstrap: str, topic_prefix: str) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    first = await ensure_topics(settings, kafka)
    second = await ensure_topics(settings, kafka)
    assert len(first) == len(Topic)
    assert second == []


async def test_bad_input_goes_to_dlq_and_consumer_keeps_going(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    await ensure_topics(settings, kafka)
    runtime = AgentRuntime("probe", settings=settings, kafka=kafka)
    router = KafkaRouter()
    handled: list[str] = []

    @runtime.agent(router, output=Topic.SHADOW)
    async def handle(message: UserMessage) -> UserMessage:
        handled.append(message.turn_id)
        return message

    runtime.broker.include_router(router)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    good = UserMessage.create(
        user_id="u1",
        session_id="s",
        text="hello",
        deadline_ms=1000,
        max_tokens=10,
        wall_clock_ms=1000,
    )
    inputs = runtime.topic(Topic.USER_MESSAGES)
    bad_bodies = [
        b"\xff\xfe not utf8",
        b"{not json",
        b'{"schema_version": 1, "text": 3}',
        b"[" * 5000 + b"]" * 5000,
        b'{"schema_version": 9}',
    ]
    try:
        # As the app does: startup first (the views, the erase watermarks every
        # record is judged by), then the consumers.
        await runtime.startup()
        await runtime.broker.start()
        for body in bad_bodies:
            await producer.send_and_wait(inputs, body, key=b"u1")
        await producer.send_and_wait(inputs, good.model_dump_json().encode(), key=b"u1")
        letters = [
            json.loads(v)
            for v in await _read_all(kafka_bootstrap, runtime.topic(Topic.DLQ), len(bad_bodies))
        ]
        results = await _read_all(kafka_bootstrap, runtime.topic(Topic.SHADOW), 1)
    finally:
        await runtime.shutdown()
        await runtime.broker.stop()
        await producer.stop()
    assert handled == [good.turn_id]
    assert json.loads(results[0])["turn_id"] == good.turn_id
    kinds = sorted(letter["error_type"] for letter in letters)
    assert kinds == sorted(["bad_utf8", "not_json", "schema", "too_deep", "schema_version"])
    originals = {base64.b64decode(letter["original_b64"]) for letter in letters}
    assert originals == set(bad_bodies)  # nothing lost: the original bytes are kept
    assert all(letter["reason"] and letter["source_topic"] == inputs for letter in letters)


async def test_owned_store_round_trip_through_compacted_topic(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    await ensure_topics(settings, kafka)
    runtime = AgentRuntime("probe", settings=settings, kafka=kafka)
    store = runtime.owned_store(Topic.BLACKBOARD, Blackboard)
    await runtime.broker.start()
    try:
        for i in range(3):
            board = Blackboard(user_id=f"user{i}")
            board.mark_applied(f"turn{i}")
            await store.put(f"user{i}", board)
        board = Blackboard(user_id="user0")
        board.mark_applied("turn0")
        board.mark_applied("turn-later")
        await store.put("user0", board)
    finally:
        await runtime.broker.stop()
    loaded = await read_latest(kafka, runtime.topic(Topic.BLACKBOARD), [0, 1, 2])
    assert set(loaded) == {"user0", "user1", "user2"}
    raw = loaded["user0"][1]
    latest = Blackboard.model_validate_json(raw) if raw is not None else None
    assert latest is not None
    assert latest.applied_turns == ["turn0", "turn-later"]
    fresh = runtime.owned_store(Topic.BLACKBOARD, Blackboard)
    await fresh.load([0, 1, 2])
    restored = fresh.get("user0")
    assert restored is not None
    assert restored.version == 2


async def test_paced_fetch_wait_reaches_the_broker(
    kafka_bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pacer sets a private attribute of aiokafka's fetcher: prove the fetch
    requests really carry it, so an aiokafka upgrade cannot silently ignore it."""
    import aiokafka.consumer.fetcher as fetcher_module

    from coachbus.bus.pacing import FetchPacer

    sent: list[int] = []
    real = fetcher_module.FetchRequest

    def spy(max_wait_ms: int, *args: object, **kwargs: object) -> object:
        sent.append(max_wait_ms)
        return real(max_wait_ms, *args, **kwargs)

    monkeypatch.setattr(fetcher_module, "FetchRequest", spy)
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    await ensure_topics(settings, KafkaSettings(bootstrap_servers=kafka_bootstrap))
    consumer = AIOKafkaConsumer(
        settings.topic(Topic.REPLIES.value), bootstrap_servers=kafka_bootstrap, fetch_max_wait_ms=5
    )
    await consumer.start()
    try:
        pacer = FetchPacer(base_ms=5, busy_ms=40, busy_at=2)
        await consumer.getmany(timeout_ms=100)
        assert sent and set(sent) == {5}
        pacer.apply(consumer, 2)
        sent.clear()
        await consumer.getmany(timeout_ms=300)
        await consumer.getmany(timeout_ms=300)
        assert 40 in sent and sent[-1] == 40
        pacer.apply(consumer, 0)
        sent.clear()
        await consumer.getmany(timeout_ms=300)
        await consumer.getmany(timeout_ms=300)
        assert sent[-1] == 5
    finally:
        await consumer.stop()


async def test_one_view_tail_feeds_views_of_several_topics(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """A process reads all its views through one consumer: each view catches up on
    what its topic held at the start, then follows new records and tombstones of
    its own topic only."""
    from coachbus.bus.state import TableView, ViewTail

    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=3)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    await ensure_topics(settings, kafka)
    boards_topic = settings.topic(Topic.BLACKBOARD.value)
    profiles_topic = settings.topic(Topic.PROFILES.value)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()

    async def put(topic: str, user: str, board: Blackboard | None) -> None:
        value = board.model_dump_json().encode() if board is not None else None
        await producer.send_and_wait(topic, value, key=user.encode())

    boards = TableView(topic=boards_topic, model=Blackboard)
    # A second view whose topic is empty at the start (the records are read with
    # the Blackboard model only to keep the test small; the view does not care).
    others = TableView(topic=profiles_topic, model=Blackboard)
    tail = ViewTail([boards, others], kafka)
    try:
        for i in range(4):
            await put(boards_topic, f"user{i}", Blackboard(user_id=f"user{i}", turn_count=i))
        await tail.start()
        async with asyncio.timeout(15):
            await boards.caught_up.wait()
            await others.caught_up.wait()
        assert [boards.get(f"user{i}").turn_count for i in range(4)] == [0, 1, 2, 3]  # type: ignore[union-attr]
        assert others.get("user0") is None

        await put(boards_topic, "user1", None)
        await put(boards_topic, "user2", Blackboard(user_id="user2", turn_count=20))
        await put(profiles_topic, "user9", Blackboard(user_id="user9", turn_count=9))
        async with asyncio.timeout(15):
            while not (
                boards.get("user1") is None
                and (b := boards.get("user2")) is not None
                and b.turn_count == 20
                and others.get("user9") is not None
            ):
                await asyncio.sleep(0.05)
        assert boards.get("user9") is None
        assert others.get("user2") is None
    finally:
        await tail.stop()
        await producer.stop()
