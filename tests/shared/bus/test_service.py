"""The runtime every service runs on (``coachbus.bus.service``), on FastStream's
in-memory broker: decoding with dead letters that carry the reason, idempotent
redelivery, results keyed by user, erasure with its hooks and confirmation, and
the erase-watermark gate in front of every handler. No real broker."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from faststream.kafka import KafkaMessage, KafkaRouter, TestKafkaBroker

from coachbus.bus.consume import AnsweredTurns
from coachbus.bus.service import AgentRuntime
from coachbus.bus.service_state import PartitionGate
from coachbus.contracts import (
    DeadLetter,
    EraseConfirmation,
    EraseRequest,
    Event,
    SessionEnd,
    UserMessage,
)
from coachbus.contracts.events import new_turn_id
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic

# FastStream's TestKafkaBroker: in memory, no network.
pytestmark = pytest.mark.inmemory

SERVICE = "shadow"


class Echo(Event):
    """A stand-in agent result."""

    kind: Literal["echo"] = "echo"
    text: str


@dataclass
class Harness:
    runtime: AgentRuntime
    calls: list[UserMessage] = field(default_factory=list)
    results: list[tuple[bytes | None, dict[str, Any]]] = field(default_factory=list)
    letters: list[tuple[bytes | None, DeadLetter]] = field(default_factory=list)
    confirmations: list[tuple[bytes | None, EraseConfirmation]] = field(default_factory=list)
    writes: list[tuple[str, bytes | None, str]] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    broker: Any = None

    async def send(self, value: bytes, key: bytes | None = b"u1") -> None:
        await self.broker.publish(value, self.runtime.topic(Topic.USER_MESSAGES), key=key)
        await self.idle()

    async def idle(self) -> None:
        for dispatcher in self.runtime.dispatchers:
            await dispatcher.idle(timeout=5)


def _message(user: str = "u1", text: str = "I want to write every morning.") -> UserMessage:
    return UserMessage.create(
        user_id=user,
        session_id="s1",
        text=text,
        deadline_ms=5000,
        max_tokens=1000,
        wall_clock_ms=5000,
    )


def _runtime(**settings: Any) -> AgentRuntime:
    runtime = AgentRuntime(
        SERVICE,
        settings=CoachbusSettings(topic_prefix=f"u{uuid.uuid4().hex[:8]}.", **settings),
        # Never dialled: kafka_io is off and TestKafkaBroker patches the broker.
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1"),
    )
    runtime.kafka_io = False
    return runtime


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    runtime = _runtime()
    h = Harness(runtime)
    router = KafkaRouter()
    store = runtime.owned_store(Topic.BLACKBOARD, Echo)

    async def capture(topic: str, value: bytes | None, key: str) -> None:
        h.writes.append((topic, value, key))

    store._write = capture  # tombstones would go through a real producer

    @runtime.agent(router, output=Topic.SHADOW)
    async def handle(message: UserMessage) -> Echo:
        h.calls.append(message)
        await store.put(message.user_id, _echo(message))
        return _echo(message)

    async def on_erase(user_id: str) -> None:
        h.erased.append(user_id)

    async def on_session_end(end: SessionEnd) -> None:
        h.ended.append(end.session_id)

    runtime.hooks.user_erased.append(on_erase)
    runtime.hooks.session_ended.append(on_session_end)

    @runtime.broker.subscriber(runtime.topic(Topic.SHADOW))
    async def results(body: dict[str, Any], msg: KafkaMessage) -> None:
        h.results.append((msg.raw_message.key, body))  # type: ignore[union-attr]

    @runtime.broker.subscriber(runtime.topic(Topic.DLQ))
    async def dlq(body: dict[str, Any], msg: KafkaMessage) -> None:
        h.letters.append((msg.raw_message.key, DeadLetter.model_validate(body)))  # type: ignore[union-attr]

    @runtime.broker.subscriber(runtime.topic(Topic.ERASE_CONFIRMATIONS))
    async def confirmed(body: dict[str, Any], msg: KafkaMessage) -> None:
        key = msg.raw_message.key  # type: ignore[union-attr]
        h.confirmations.append((key, EraseConfirmation.model_validate(body)))

    runtime.include_router(router)
    async with TestKafkaBroker(runtime.broker) as broker:
        h.broker = broker
        yield h


def _echo(message: UserMessage) -> Echo:
    return Echo(
        turn_id=message.turn_id,
        session_id=message.session_id,
        user_id=message.user_id,
        text=message.text,
    )


# --------------------------------------------------------------------------- decoding


@pytest.mark.parametrize(
    ("raw", "error_type"),
    [
        (b"{this is not json", "not_json"),
        (b'{"text": "caf\xc3\x28"}', "bad_utf8"),
        (b"", "empty"),
        (json.dumps({"schema_version": 99, "turn_id": "t9"}).encode(), "schema_version"),
    ],
)
async def test_undecodable_input_is_dead_lettered_with_the_reason(
    harness: Harness, raw: bytes, error_type: str
) -> None:
    await harness.send(raw, key=b"mallory")
    assert harness.calls == [], "no handler may see what does not decode"
    assert harness.results == []
    [(key, letter)] = harness.letters
    assert key == b"mallory"  # the dead letter is keyed like the record
    assert letter.service == SERVICE
    assert letter.error_type == error_type
    assert letter.reason
    assert letter.key == "mallory"
    assert letter.source_topic == harness.runtime.topic(Topic.USER_MESSAGES)
    assert base64.b64decode(letter.original_b64) == raw
    assert letter.original_size == len(raw) and not letter.original_truncated


async def test_a_dead_letter_names_the_turn_and_user_it_could_read(harness: Harness) -> None:
    wrong = {"schema_version": 1, "turn_id": "t-wrong", "user_id": "mallory", "kind": "message"}
    await harness.send(json.dumps(wrong).encode(), key=b"mallory")
    [(_key, letter)] = harness.letters
    assert letter.error_type == "schema"
    assert "schema validation failed" in letter.reason
    assert (letter.turn_id, letter.user_id) == ("t-wrong", "mallory")


async def test_a_message_over_the_byte_limit_is_dead_lettered_truncated() -> None:
    runtime = _runtime(max_message_chars=100)
    router = KafkaRouter()
    calls: list[UserMessage] = []
    letters: list[DeadLetter] = []

    @runtime.agent(router, output=Topic.SHADOW)
    async def handle(message: UserMessage) -> Echo:
        calls.append(message)
        return _echo(message)

    @runtime.broker.subscriber(runtime.topic(Topic.DLQ))
    async def dlq(body: dict[str, Any]) -> None:
        letters.append(DeadLetter.model_validate(body))

    runtime.include_router(router)
    limit = runtime.settings.max_message_bytes
    huge = _message(text="x" * (limit + 70 * 1024)).model_dump_json().encode()
    async with TestKafkaBroker(runtime.broker) as broker:
        await broker.publish(huge, runtime.topic(Topic.USER_MESSAGES), key=b"u1")
        for dispatcher in runtime.dispatchers:
            await dispatcher.idle(timeout=5)
    assert calls == []
    [letter] = letters
    assert letter.error_type == "too_large"
    assert f"exceeds limit {limit}" in letter.reason
    assert letter.original_size == len(huge)
    assert letter.original_truncated
    assert len(base64.b64decode(letter.original_b64)) < len(huge)


# --------------------------------------------------------------------------- results


async def test_result_is_published_keyed_by_user(harness: Harness) -> None:
    message = _message(user="ada")
    # The record key does not choose the result's key: the message's user does.
    await harness.send(message.model_dump_json().encode(), key=b"not-the-user")
    assert [m.turn_id for m in harness.calls] == [message.turn_id]
    [(key, body)] = harness.results
    assert key == b"ada"
    assert body["turn_id"] == message.turn_id
    assert body["user_id"] == "ada"
    assert harness.letters == []


async def test_redelivered_turn_is_answered_once(harness: Harness) -> None:
    message = _message()
    raw = message.model_dump_json().encode()
    for _ in range(3):  # a producer retry, then a redelivery after a crash
        await harness.send(raw)
    assert [m.turn_id for m in harness.calls] == [message.turn_id]
    assert len(harness.results) == 1
    # A new turn of the same user is answered as usual.
    other = _message(text="And I want to read more.")
    await harness.send(other.model_dump_json().encode())
    assert [m.turn_id for m in harness.calls] == [message.turn_id, other.turn_id]


async def test_a_failing_handler_is_dead_lettered_and_later_turns_go_on() -> None:
    runtime = _runtime()
    router = KafkaRouter()
    letters: list[DeadLetter] = []
    answered: list[str] = []

    @runtime.agent(router, output=Topic.SHADOW)
    async def handle(message: UserMessage) -> Echo:
        if "boom" in message.text:
            raise RuntimeError("boom")
        answered.append(message.turn_id)
        return _echo(message)

    @runtime.broker.subscriber(runtime.topic(Topic.DLQ))
    async def dlq(body: dict[str, Any]) -> None:
        letters.append(DeadLetter.model_validate(body))

    runtime.include_router(router)
    bad, good = _message(text="boom"), _message(text="fine")
    async with TestKafkaBroker(runtime.broker) as broker:
        for message in (bad, good):
            await broker.publish(
                message.model_dump_json().encode(), runtime.topic(Topic.USER_MESSAGES), key=b"u1"
            )
        for dispatcher in runtime.dispatchers:
            await dispatcher.idle(timeout=30)
    assert answered == [good.turn_id]
    [letter] = letters
    assert letter.error_type == "handler"
    assert "RuntimeError: boom" in letter.reason
    assert letter.turn_id == bad.turn_id


def test_answered_turns_are_bounded_and_learnt_from_published_results() -> None:
    answered = AnsweredTurns(capacity=2)
    answered.learn([b'{"turn_id": "a"}', None, b"", b"not json", b"[1]", b'{"turn_id": 7}'])
    assert "a" in answered
    answered.add("b")
    answered.add("a")  # touched again: the newest
    answered.add("c")
    assert "b" not in answered  # the oldest went first
    assert "a" in answered and "c" in answered


# --------------------------------------------------------------------------- erasure


async def test_erase_request_runs_every_erase_step_and_confirms(harness: Harness) -> None:
    message = _message(user="erin")
    await harness.send(message.model_dump_json().encode(), key=b"erin")
    assert harness.writes and harness.writes[-1][1] is not None  # the store was written
    erase = EraseRequest(turn_id=new_turn_id(), session_id="s1", user_id="erin")
    await harness.send(erase.model_dump_json().encode(), key=b"erin")
    # The handler never sees the request; the owned store is tombstoned; hooks ran.
    assert [m.turn_id for m in harness.calls] == [message.turn_id]
    topic = harness.runtime.topic(Topic.BLACKBOARD)
    assert harness.writes[-1] == (topic, None, "erin")
    assert harness.erased == ["erin"]
    # An owner of state confirms, keyed by the user, after its tombstones.
    [(key, confirmation)] = harness.confirmations
    assert key == b"erin"
    assert (confirmation.user_id, confirmation.request_id) == ("erin", erase.turn_id)
    assert confirmation.owner == SERVICE
    assert harness.results == [(b"erin", harness.results[0][1])]


async def test_erase_watermark_drops_turns_begun_before_the_erase(harness: Harness) -> None:
    before = _message(user="erin", text="Written before the erase.")
    other = _message(user="olga", text="Written before erin's erase, by someone else.")
    await asyncio.sleep(0.005)  # turn ids are time-ordered to the millisecond
    erase = EraseRequest(turn_id=new_turn_id(), session_id="s1", user_id="erin")
    await harness.send(erase.model_dump_json().encode(), key=b"erin")
    # In flight at the erase (or redelivered after a crash): dropped before any handler.
    await harness.send(before.model_dump_json().encode(), key=b"erin")
    assert harness.calls == []
    assert harness.results == []
    assert harness.letters == []
    # A turn begun after the erase starts from nothing and is answered.
    await asyncio.sleep(0.005)
    after = _message(user="erin", text="Hello again.")
    await harness.send(after.model_dump_json().encode(), key=b"erin")
    assert [m.turn_id for m in harness.calls] == [after.turn_id]
    # Erin's watermark does not touch another user's older turn.
    await harness.send(other.model_dump_json().encode(), key=b"olga")
    assert [m.turn_id for m in harness.calls] == [after.turn_id, other.turn_id]


async def test_session_end_reaches_its_hooks_only(harness: Harness) -> None:
    end = SessionEnd(turn_id=new_turn_id(), session_id="s9", user_id="u1")
    await harness.send(end.model_dump_json().encode())
    assert harness.ended == ["s9"]
    assert harness.calls == [] and harness.results == [] and harness.letters == []


async def test_records_wait_for_partition_state_and_every_watermark() -> None:
    """With broker I/O on, a record waits at the gate until its partition's state is
    loaded and every erase watermark is known."""
    runtime = _runtime()
    router = KafkaRouter()
    answered: list[str] = []

    @runtime.agent(router, output=Topic.SHADOW)
    async def handle(message: UserMessage) -> Echo:
        answered.append(message.turn_id)
        return _echo(message)

    runtime.include_router(router)
    runtime.kafka_io = True  # the gate is only shut with broker I/O on
    message = _message()
    async with TestKafkaBroker(runtime.broker) as broker:
        await broker.publish(
            message.model_dump_json().encode(),
            runtime.topic(Topic.USER_MESSAGES),
            key=b"u1",
            partition=0,
        )
        await asyncio.sleep(0.1)
        assert answered == [], "handled before the partition's state was loaded"
        runtime.state.gate.prepare({0})
        runtime.state.gate.open({0})
        await asyncio.sleep(0.1)
        assert answered == [], "handled before every erase watermark was known"
        runtime.erasures.caught_up.set()
        for dispatcher in runtime.dispatchers:
            await dispatcher.idle(timeout=5)
    assert answered == [message.turn_id]


async def test_partition_gate_releases_revoked_waiters_as_abandoned() -> None:
    gate = PartitionGate()
    gate.prepare({1, 2})
    waiting = asyncio.ensure_future(gate.wait(1))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate.close({1})  # revoked before its state arrived
    assert await waiting is False
    gate.open({2})
    assert await gate.wait(2) is True
