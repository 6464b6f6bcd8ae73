"""Each agent's handler on FastStream's in-memory broker: typed message in, typed
result out on the agent's topic, bad input to the dead-letter topic."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
from faststream.kafka import TestKafkaBroker
from pydantic import TypeAdapter

from coachbus.contracts import (
    AGENTS,
    AgentResultAdapter,
    DeadLetter,
    EraseRequest,
    Reply,
    UserMessage,
)
from coachbus.topics import AGENT_TOPICS, Topic

pytestmark = pytest.mark.inmemory


def _message(text: str, user: str = "u1") -> UserMessage:
    return UserMessage.create(
        user_id=user,
        session_id="s1",
        text=text,
        deadline_ms=5000,
        max_tokens=1000,
        wall_clock_ms=5000,
    )


def _handlers(agent: str) -> ModuleType:
    module = importlib.import_module(f"services.{agent}.handlers")
    module.runtime.kafka_io = False
    module.runtime.include_router(module.router)
    return module


@pytest.mark.parametrize("agent", AGENTS)
async def test_agent_publishes_typed_result(agent: str) -> None:
    handlers = _handlers(agent)
    runtime = handlers.runtime
    message = _message("I want to start running three times a week, but I never find the time.")
    results = []
    replies = []

    @runtime.broker.subscriber(runtime.topic(AGENT_TOPICS[agent]))
    async def collect(body: dict) -> None:  # type: ignore[type-arg]
        results.append(AgentResultAdapter.validate_python(body))

    # Coach's at-once reply travels on coach-replies (replies is Synth's and the
    # review endpoint's).
    @runtime.broker.subscriber(runtime.topic(Topic.COACH_REPLIES))
    async def collect_replies(body: dict) -> None:  # type: ignore[type-arg]
        replies.append(TypeAdapter(Reply).validate_python(body))

    async with TestKafkaBroker(runtime.broker) as broker:
        await broker.publish(
            message.model_dump_json().encode(),
            runtime.topic(Topic.USER_MESSAGES),
            key=message.user_id.encode(),
        )
        for dispatcher in runtime.dispatchers:
            await dispatcher.idle()
    assert len(results) == 1
    result = results[0]
    assert result.agent == agent
    assert result.turn_id == message.turn_id
    assert result.tier == "deterministic"
    assert result.latency_ms >= 0
    if agent == "coach":
        assert [r.kind for r in replies] == ["coach"]
        assert replies[0].text == result.payload.text  # type: ignore[union-attr]


async def test_invalid_input_is_dead_lettered_in_memory() -> None:
    handlers = _handlers("plasticity")
    runtime = handlers.runtime
    letters: list[DeadLetter] = []

    @runtime.broker.subscriber(runtime.topic(Topic.DLQ))
    async def collect(body: dict) -> None:  # type: ignore[type-arg]
        letters.append(DeadLetter.model_validate(body))

    async with TestKafkaBroker(runtime.broker) as broker:
        await broker.publish(b"\x00garbage", runtime.topic(Topic.USER_MESSAGES), key=b"u9")
        for dispatcher in runtime.dispatchers:
            await dispatcher.idle()
    assert len(letters) == 1
    assert letters[0].error_type == "not_json"
    assert letters[0].key == "u9"


async def test_erase_request_forgets_owned_state() -> None:
    handlers = _handlers("shadow")
    runtime = handlers.runtime
    written: list[tuple[str, bytes | None, str]] = []

    async def capture(topic: str, value: bytes | None, key: str) -> None:
        written.append((topic, value, key))

    handlers.boards._write = capture
    message = _message("I want to write every morning.", user="erase-me")
    erase = EraseRequest(turn_id="e1", session_id="s1", user_id="erase-me")
    async with TestKafkaBroker(runtime.broker) as broker:
        for event in (message, erase):
            await broker.publish(
                event.model_dump_json().encode(),
                runtime.topic(Topic.USER_MESSAGES),
                key=b"erase-me",
            )
            for dispatcher in runtime.dispatchers:
                await dispatcher.idle()
    assert handlers.boards.get("erase-me") is None
    assert written[-1] == (runtime.topic(Topic.BLACKBOARD), None, "erase-me")
    assert written[0][1] is not None  # the board was written before it was erased
