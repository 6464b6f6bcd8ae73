"""How one service reads the bus: subscriptions of its consumer group, each with a
:class:`~coachbus.bus.dispatch.KeyedDispatcher` behind it.

In front of every handler a record passes three checks: its partition's state is
loaded (the :class:`~coachbus.bus.service_state.PartitionGate`), every erase
watermark is known, and its turn did not begin before its user's erase. An agent's
handler (:meth:`Subscriptions.agent`) is typed: a user message in, the agent's
result out, published by the runtime.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from aiokafka import TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from faststream.kafka import KafkaRouter
from faststream.kafka.message import KafkaMessage
from faststream.middlewares import AckPolicy
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from coachbus.bounded import BoundedSet
from coachbus.bus.codec import DecodeError, decode
from coachbus.bus.dispatch import Hold, KeyedDispatcher, Record
from coachbus.bus.hooks import RuntimeHooks
from coachbus.bus.publish import Publisher
from coachbus.bus.service_state import PartitionGate, ServiceState
from coachbus.bus.state import read_tail
from coachbus.contracts import EraseRequest, Event, SessionEnd, UserInputAdapter, UserMessage
from coachbus.metrics import AGENT_LATENCY, MESSAGES
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic
from coachbus.tracing import extract_context, turn_span

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Event)
# How far back in its output topic an agent looks, per partition, for turns it
# already answered.
ANSWERED_LOOKBACK = 5_000


def record_context(record: Record) -> Context:
    """The trace context a record carries in its headers (aiokafka: (str, bytes) pairs)."""
    return extract_context(dict(record.headers or ()))


class AnsweredTurns(BoundedSet[str]):
    """A bounded set of turn ids this agent has published a result for (the one
    bounded set, :class:`coachbus.bounded.BoundedSet`, taught from its topic's tail)."""

    def __init__(self, capacity: int = 50_000) -> None:
        super().__init__(capacity)

    def learn(self, values: Iterable[bytes | None]) -> None:
        for value in values:
            if not value:
                continue
            try:
                turn_id = json.loads(value).get("turn_id")
            except (ValueError, AttributeError):
                continue
            if isinstance(turn_id, str):
                self.add(turn_id)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Revocation finishes work in hand before the partition moves; assignment
    loads the partition's state before any of its input is processed."""

    def __init__(
        self, gate: PartitionGate, dispatcher: KeyedDispatcher, hooks: RuntimeHooks
    ) -> None:
        self._gate = gate
        self._dispatcher = dispatcher
        self._hooks = hooks

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in revoked}
        # Close the gate first: records still waiting for state give up (uncommitted)
        # instead of holding up the revocation.
        self._gate.close(numbers)
        await self._dispatcher.on_revoked(revoked)
        await self._hooks.partitions_revoked.run(numbers)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in assigned}
        # aiokafka starts fetching the new partitions while this callback runs, so
        # records are held at the gate until the partitions' state is loaded.
        self._gate.prepare(numbers)
        try:
            await self._hooks.partitions_assigned.run(numbers)
        finally:
            self._gate.open(numbers)


async def _whole_message(message: Any) -> Any:
    # The handler gets the StreamMessage itself as its body. Asking for it through
    # FastStream's context (``msg: KafkaMessage``) would cost a worker-thread hop
    # per record: fast_depends resolves that sync context field in a thread pool.
    return message


class Subscriptions:
    """The subscriptions of one service's consumer group and the dispatcher behind
    each (``dispatchers``: what tests and benchmarks wait on to go idle)."""

    def __init__(
        self,
        service: str,
        *,
        settings: CoachbusSettings,
        kafka: KafkaSettings,
        hooks: RuntimeHooks,
        state: ServiceState,
        publisher: Publisher,
    ) -> None:
        self.service = service
        self.group_id = f"{settings.topic_prefix}{service}"
        self._settings = settings
        self._kafka = kafka
        self._hooks = hooks
        self._state = state
        self._publisher = publisher
        self.dispatchers: list[KeyedDispatcher] = []

    def _topic(self, topic: Topic) -> str:
        return self._settings.topic(topic.value)

    async def _on_failure(self, record: Record, exc: BaseException) -> None:
        await self._publisher.dead_letter(
            record, f"handler failed after retries: {type(exc).__name__}: {exc}", "handler"
        )

    def consume(
        self,
        router: KafkaRouter,
        topics: Sequence[Topic],
        handle: Callable[[Record], Awaitable[Hold | None]],
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> KeyedDispatcher:
        """Subscribe the router to ``topics`` with this service's group, dispatching
        records key-ordered and committing only what is done."""
        state = self._state

        async def gated(record: Record) -> Hold | None:
            if state.kafka_io and not await state.gate.wait(record.partition):
                # Revoked before its state arrived: leave it uncommitted for the next owner.
                abandoned: Hold = asyncio.get_running_loop().create_future()
                abandoned.cancel()
                return abandoned
            if state.kafka_io and not state.erasures.caught_up.is_set():
                # Every watermark is known before the first record is judged by them.
                await state.erasures.caught_up.wait()
            if state.erasures.drops(record.key, record.value):
                # A turn that began before its user's erase (in flight then, or
                # redelivered after a crash): no handler may see it, so no agent
                # and no state of any service brings the user back.
                MESSAGES.labels(self.service, record.topic, "erased").inc()
                return None
            return await handle(record)

        dispatcher = KeyedDispatcher(
            service=self.service,
            handle=gated,
            on_failure=self._on_failure,
            max_concurrency=self._settings.max_concurrency,
            pacer=self._kafka.pacer(),
        )
        self.dispatchers.append(dispatcher)

        subscriber = router.subscriber(
            *[self._topic(t) for t in topics],
            group_id=self.group_id,
            ack_policy=AckPolicy.MANUAL,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self._kafka.fetch_max_wait_ms,
            max_poll_interval_ms=self._kafka.max_poll_interval_ms,
            session_timeout_ms=self._kafka.session_timeout_ms,
            heartbeat_interval_ms=self._kafka.heartbeat_interval_ms,
            # Range assignment keeps partition N of every topic on the same member:
            # the one that owns a user's input also owns the user's joins and state.
            partition_assignment_strategy=(RangePartitionAssignor,),
            listener=_Rebalance(state.gate, dispatcher, self._hooks),
            # Decoding is ours (with dead-lettering): FastStream must not parse first.
            decoder=_whole_message,
            title=title,
            description=description,
        )

        @subscriber
        async def submit(msg: Any) -> None:
            message: KafkaMessage = msg
            await dispatcher.submit(message.raw_message, message.consumer)  # type: ignore[arg-type]

        # FastStream makes the consumer when the broker starts; until a record comes,
        # only this reference lets the pacer see it (and let it go idle).
        dispatcher.watch(lambda: getattr(subscriber, "consumer", None))
        return dispatcher

    def agent(
        self,
        router: KafkaRouter,
        *,
        output: Topic,
        input_topic: Topic = Topic.USER_MESSAGES,
    ) -> Callable[[Callable[[UserMessage], Awaitable[R]]], Callable[[UserMessage], Awaitable[R]]]:
        """Register a typed agent handler: a user message in, the agent's result out.

        The runtime decodes (dead-lettering what does not parse), times the call,
        publishes the result keyed by user and only then lets the offset be committed.
        """
        limit = self._settings.max_message_bytes
        # Turns this agent already answered: a redelivered message (crash, rebalance)
        # finds its result here and costs no second LLM call.
        answered = AnsweredTurns()
        output_name = self._topic(output)
        state, publisher = self._state, self._publisher

        async def remember(partitions: set[int]) -> None:
            if state.kafka_io:
                tail = await read_tail(
                    self._kafka, output_name, sorted(partitions), ANSWERED_LOOKBACK
                )
                answered.learn(value for _p, _k, value in tail)

        self._hooks.partitions_assigned.append(remember)

        def register(
            fn: Callable[[UserMessage], Awaitable[R]],
        ) -> Callable[[UserMessage], Awaitable[R]]:
            async def handle(record: Record) -> None:
                try:
                    message = decode(record.value, UserInputAdapter, max_bytes=limit)
                except DecodeError as exc:
                    await publisher.dead_letter(record, exc.reason, exc.error_type)
                    return None
                if isinstance(message, EraseRequest):
                    await state.erase_user(message.user_id, message, record)
                    return None
                if isinstance(message, SessionEnd):
                    await self._hooks.session_ended.run(message)
                    return None
                if message.turn_id in answered:
                    MESSAGES.labels(self.service, record.topic, "duplicate").inc()
                    return None
                started = time.perf_counter()
                with turn_span(
                    f"{self.service}.turn",
                    message.turn_id,
                    self.service,
                    parent=record_context(record),
                    kind=SpanKind.CONSUMER,
                ):
                    result = await fn(message)
                    await publisher.publish(output, result, key=message.user_id)
                answered.add(message.turn_id)
                tier = getattr(result, "tier", "deterministic")
                AGENT_LATENCY.labels(self.service, tier, "ok").observe(
                    time.perf_counter() - started
                )
                MESSAGES.labels(self.service, record.topic, "ok").inc()
                return None

            self.consume(
                router,
                [input_topic],
                handle,
                title=f"{self.service}:{input_topic.value}",
                description=fn.__doc__,
            )
            router.publisher(self._topic(output), title=f"{self.service}:{output.value}")
            return fn

        return register
