"""The runtime one service runs on, and the app factory that serves it.

A service's ``handlers.py`` creates an :class:`AgentRuntime`, a FastStream
``KafkaRouter`` and registers its typed handler (message in, result out); its
``main.py`` builds the app with :meth:`AgentRuntime.build_app`. The runtime adds
what every service needs: key-ordered dispatch with at-least-once commits,
dead-lettering with the reason, state stores loaded on partition assignment,
metrics and health on one port.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from faststream.asgi import AsgiFastStream, make_ping_asgi
from faststream.kafka import KafkaBroker, KafkaRouter
from faststream.kafka.message import KafkaMessage
from faststream.kafka.prometheus import KafkaPrometheusMiddleware
from faststream.middlewares import AckPolicy
from faststream.specification import AsyncAPI
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from prometheus_client import make_asgi_app
from pydantic import BaseModel, TypeAdapter

from coachbus import __version__
from coachbus.bounded import BoundedSet
from coachbus.bus.admin import ensure_topics, wait_for_broker
from coachbus.bus.codec import JSON_HEADERS, DecodeError, decode, encode
from coachbus.bus.dispatch import Hold, KeyedDispatcher, Record
from coachbus.bus.erasure import Erasures, origin
from coachbus.bus.state import OwnedStore, TableView, ViewTail, read_tail
from coachbus.contracts import (
    DLQ_ORIGINAL_MAX,
    DeadLetter,
    EraseConfirmation,
    EraseRequest,
    EraseWatermark,
    Event,
    HumanReviewRequest,
    SessionEnd,
    UserInputAdapter,
    UserMessage,
)
from coachbus.memory_trim import trim_forever
from coachbus.llm import LLMClient, LLMSettings, Policy, PromptBuilder, Router, describe
from coachbus.logs import setup_logging
from coachbus.metrics import AGENT_LATENCY, DLQ_MESSAGES, MESSAGES, REGISTRY
from coachbus.settings import (
    CoachbusSettings,
    KafkaSettings,
    faststream_security,
    get_kafka_settings,
    get_settings,
)
from coachbus.topics import Topic
from coachbus.tracing import extract_context, inject_headers, setup_tracing, turn_span

log = logging.getLogger(__name__)

# The agents' default ports; the gateway's is a setting (COACHBUS_GATEWAY_PORT).
DEFAULT_PORTS = {
    "shadow": 8101,
    "persona": 8102,
    "plasticity": 8103,
    "stability": 8104,
    "coach": 8105,
    "synth": 8106,
}

E = TypeVar("E", bound=Event)
R = TypeVar("R", bound=Event)
S = TypeVar("S", bound=BaseModel)
PartitionHook = Callable[[set[int]], Awaitable[None]]


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Revocation finishes work in hand before the partition moves; assignment
    loads the partition's state before any of its input is processed."""

    def __init__(self, runtime: AgentRuntime, dispatcher: KeyedDispatcher) -> None:
        self._runtime = runtime
        self._dispatcher = dispatcher

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in revoked}
        # Close the gate first: records still waiting for state give up (uncommitted)
        # instead of holding up the revocation.
        self._runtime.gate.close(numbers)
        await self._dispatcher.on_revoked(revoked)
        for hook in self._runtime.revoke_hooks:
            await hook(numbers)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        numbers = {tp.partition for tp in assigned}
        # aiokafka starts fetching the new partitions while this callback runs, so
        # records are held at the gate until the partitions' state is loaded.
        self._runtime.gate.prepare(numbers)
        try:
            for hook in self._runtime.assign_hooks:
                await hook(numbers)
        finally:
            self._runtime.gate.open(numbers)


class PartitionGate:
    """Holds a partition's records until its state has been loaded after assignment."""

    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}

    def _event(self, partition: int) -> asyncio.Event:
        event = self._events.get(partition)
        if event is None:
            event = self._events[partition] = asyncio.Event()
        return event

    def prepare(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._event(partition)

    def open(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._event(partition).set()

    def close(self, partitions: set[int]) -> None:
        for partition in partitions:
            event = self._events.pop(partition, None)
            if event is not None and not event.is_set():
                event.set()  # release anyone waiting; the dispatcher drops revoked work

    async def wait(self, partition: int) -> bool:
        """Wait for the partition's state; False if it was revoked meanwhile."""
        event = self._event(partition)
        await event.wait()
        return self._events.get(partition) is event


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


async def _whole_message(message: Any) -> Any:
    # The handler gets the StreamMessage itself as its body. Asking for it through
    # FastStream's context (``msg: KafkaMessage``) would cost a worker-thread hop
    # per record: fast_depends resolves that sync context field in a thread pool.
    return message


class AgentRuntime:
    def __init__(
        self,
        service: str,
        *,
        settings: CoachbusSettings | None = None,
        kafka: KafkaSettings | None = None,
    ) -> None:
        self.service = service
        self.settings = settings or get_settings()
        self.kafka = kafka or get_kafka_settings()
        self.group_id = f"{self.settings.topic_prefix}{service}"
        self.broker = KafkaBroker(
            self.kafka.servers,
            client_id=f"coachbus-{service}",
            security=faststream_security(self.kafka),  # type: ignore[arg-type]
            middlewares=(KafkaPrometheusMiddleware(registry=REGISTRY, app_name="coachbus"),),
            allow_auto_create_topics=False,
            logger=logging.getLogger(f"coachbus.{service}"),
        )
        self.dispatchers: list[KeyedDispatcher] = []
        self._trimmer: asyncio.Task[None] | None = None
        self.assign_hooks: list[PartitionHook] = []
        self.revoke_hooks: list[PartitionHook] = []
        self.views: list[TableView[Any]] = []
        self._view_tail: ViewTail | None = None
        # Every user's erase watermark (topic ``erasures``): records of a turn that
        # began before it are dropped before any handler sees them (see ``consume``).
        self.erasures = Erasures(topic=self.topic(Topic.ERASURES), model=EraseWatermark)
        self.views.append(self.erasures)
        self.stores: list[OwnedStore[Any]] = []
        self.erase_hooks: list[Callable[[str], Awaitable[None]]] = []
        self.session_end_hooks: list[Callable[[SessionEnd], Awaitable[None]]] = []
        self._producer: AIOKafkaProducer | None = None
        self._routers: set[int] = set()
        self._prompt_builder: PromptBuilder | None = None
        self.startup_hooks: list[Callable[[], Awaitable[None]]] = []
        self.shutdown_hooks: list[Callable[[], Awaitable[None]]] = []
        # Tests without a broker (FastStream's TestKafkaBroker) switch this off.
        self.kafka_io = True
        self.gate = PartitionGate()
        # How this service thinks: the deterministic tier always, LLM tiers when an
        # endpoint is configured; ``tiers`` (the LLM router, not a FastStream router)
        # picks the cheapest that carries a decision.
        self.llm_settings = LLMSettings()
        self.llm = LLMClient(self.llm_settings) if self.llm_settings.enabled else None
        self.tiers = Router(
            policy=Policy.load(self.llm_settings.policy_file),
            client=self.llm,
            publish_human_review=self._publish_review,
        )

    # ------------------------------------------------------------------ naming

    def topic(self, topic: Topic) -> str:
        return self.settings.topic(topic.value)

    # ------------------------------------------------------------------ publishing

    async def publish(self, topic: Topic | str, event: BaseModel, *, key: str) -> None:
        """Publish and wait for the broker's acknowledgement (at-least-once)."""
        name = self.topic(topic) if isinstance(topic, Topic) else topic
        # The current trace context rides along, so one trace spans the whole turn.
        await self.broker.publish(
            encode(event), name, key=key.encode(), headers=inject_headers(JSON_HEADERS)
        )

    async def _raw_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            self._producer = AIOKafkaProducer(
                bootstrap_servers=self.kafka.servers, **self.kafka.client_kwargs()
            )
            await self._producer.start()
        return self._producer

    async def _write_raw(self, topic: str, value: bytes | None, key: str) -> None:
        if value is not None:
            await self.broker.publish(value, topic, key=key.encode(), headers=JSON_HEADERS)
            return
        # FastStream encodes None as b"", which compaction keeps as a value: a real
        # tombstone needs a null value, so it goes through aiokafka directly.
        producer = await self._raw_producer()
        await producer.send_and_wait(topic, None, key=key.encode())

    async def tombstone(self, topic: Topic, key: str) -> None:
        """Write a real tombstone (null value) for ``key`` on a compacted topic."""
        await self._write_raw(self.topic(topic), None, key)

    async def publish_located(self, topic: Topic, event: BaseModel, *, key: str) -> tuple[int, int]:
        """Publish like ``publish`` and return where the record landed (partition,
        offset): an erase receipt names its place in the user's partition."""
        producer = await self._raw_producer()
        headers = [(k, v.encode()) for k, v in inject_headers(JSON_HEADERS).items()]
        meta = await producer.send_and_wait(
            self.topic(topic), encode(event), key=key.encode(), headers=headers
        )
        return meta.partition, meta.offset

    async def erase_user(
        self, user_id: str, request: EraseRequest | None = None, record: Record | None = None
    ) -> None:
        """Forget a user: tombstones in every store this service owns, then hooks.

        With the request (seen in band on ``user-messages``) its watermark applies at
        once, before the ``erasures`` record reaches this process; and an owner of
        state confirms, after its tombstones, on ``erase-confirmations``.
        """
        if request is not None and record is not None:
            erased_at = origin(request.turn_id, request.created_at) or request.created_at
            self.erasures.note(
                EraseWatermark(
                    user_id=user_id,
                    request_id=request.turn_id,
                    erased_at=erased_at,
                    partition=record.partition,
                    offset=record.offset,
                    owners=[],
                )
            )
        for store in self.stores:
            await store.erase(user_id)
        for view in self.views:
            if view is not self.erasures:
                view.erase(user_id)
        for hook in self.erase_hooks:
            await hook(user_id)
        if request is not None and self.stores:
            confirmation = EraseConfirmation(
                user_id=user_id, request_id=request.turn_id, owner=self.service
            )
            await self.publish(Topic.ERASE_CONFIRMATIONS, confirmation, key=user_id)

    def prompt_builder(self) -> PromptBuilder:
        """The agent's prompt builder, made once: its token counter loads a tokenizer."""
        if self._prompt_builder is None:
            self._prompt_builder = PromptBuilder(self.llm_settings)
        return self._prompt_builder

    async def _publish_review(self, request: HumanReviewRequest) -> None:
        await self.publish(Topic.HUMAN_REVIEW, request, key=request.user_id)

    async def dead_letter(self, record: Record, reason: str, error_type: str) -> None:
        raw = record.value or b""
        ids: dict[str, str | None] = {"turn_id": None, "user_id": None}
        if len(raw) <= DLQ_ORIGINAL_MAX:
            try:
                head = TypeAdapter(dict[str, Any]).validate_json(raw)
                ids = {k: str(head[k])[:128] if k in head else None for k in ids}
            except Exception:
                pass
        letter = DeadLetter(
            service=self.service,
            source_topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key.decode("utf-8", "replace")[:512] if record.key is not None else None,
            reason=reason[:2000],
            error_type=error_type,
            original_b64=base64.b64encode(raw[:DLQ_ORIGINAL_MAX]).decode(),
            original_size=len(raw),
            original_sha256=hashlib.sha256(raw).hexdigest(),
            original_truncated=len(raw) > DLQ_ORIGINAL_MAX,
            turn_id=ids["turn_id"],
            user_id=ids["user_id"],
        )
        await self.publish(Topic.DLQ, letter, key=letter.key or letter.user_id or "")
        DLQ_MESSAGES.labels(self.service, error_type).inc()
        MESSAGES.labels(self.service, record.topic, "dlq").inc()
        log.warning(
            "dead-lettered %s[%d]@%d: %s", record.topic, record.partition, record.offset, reason
        )

    async def _on_failure(self, record: Record, exc: BaseException) -> None:
        await self.dead_letter(
            record, f"handler failed after retries: {type(exc).__name__}: {exc}", "handler"
        )

    # ------------------------------------------------------------------ state

    def owned_store(self, topic: Topic, model: type[S]) -> OwnedStore[S]:
        """State this service alone writes, kept for the partitions it owns."""
        store = OwnedStore(
            topic=self.topic(topic), model=model, kafka=self.kafka, write=self._write_raw
        )
        self.stores.append(store)

        async def load(partitions: set[int]) -> None:
            if self.kafka_io:
                started = time.monotonic()
                count = await store.load(partitions)
                log.info(
                    "%s: loaded %d records of %s for partitions %s in %.0f ms",
                    self.service,
                    count,
                    store.topic,
                    sorted(partitions),
                    (time.monotonic() - started) * 1000,
                )

        async def drop(partitions: set[int]) -> None:
            store.drop(partitions)

        self.assign_hooks.append(load)
        self.revoke_hooks.append(drop)
        return store

    def table_view(self, topic: Topic, model: type[S]) -> TableView[S]:
        """A read-only copy of state another service writes."""
        view = TableView(topic=self.topic(topic), model=model)
        self.views.append(view)
        return view

    # ------------------------------------------------------------------ consuming

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

        async def gated(record: Record) -> Hold | None:
            if self.kafka_io and not await self.gate.wait(record.partition):
                # Revoked before its state arrived: leave it uncommitted for the next owner.
                abandoned: Hold = asyncio.get_running_loop().create_future()
                abandoned.cancel()
                return abandoned
            if self.kafka_io and not self.erasures.caught_up.is_set():
                # Every watermark is known before the first record is judged by them.
                await self.erasures.caught_up.wait()
            if self.erasures.drops(record.key, record.value):
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
            max_concurrency=self.settings.max_concurrency,
            pacer=self.kafka.pacer(),
        )
        self.dispatchers.append(dispatcher)

        subscriber = router.subscriber(
            *[self.topic(t) for t in topics],
            group_id=self.group_id,
            ack_policy=AckPolicy.MANUAL,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self.kafka.fetch_max_wait_ms,
            max_poll_interval_ms=self.kafka.max_poll_interval_ms,
            session_timeout_ms=self.kafka.session_timeout_ms,
            heartbeat_interval_ms=self.kafka.heartbeat_interval_ms,
            # Range assignment keeps partition N of every topic on the same member:
            # the one that owns a user's input also owns the user's joins and state.
            partition_assignment_strategy=(RangePartitionAssignor,),
            listener=_Rebalance(self, dispatcher),
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
        limit = self.settings.max_message_bytes
        # Turns this agent already answered: a redelivered message (crash, rebalance)
        # finds its result here and costs no second LLM call.
        answered = AnsweredTurns()
        output_name = self.topic(output)

        async def remember(partitions: set[int]) -> None:
            if self.kafka_io:
                tail = await read_tail(
                    self.kafka, output_name, sorted(partitions), ANSWERED_LOOKBACK
                )
                answered.learn(value for _p, _k, value in tail)

        self.assign_hooks.append(remember)

        def register(
            fn: Callable[[UserMessage], Awaitable[R]],
        ) -> Callable[[UserMessage], Awaitable[R]]:
            async def handle(record: Record) -> None:
                try:
                    message = decode(record.value, UserInputAdapter, max_bytes=limit)
                except DecodeError as exc:
                    await self.dead_letter(record, exc.reason, exc.error_type)
                    return None
                if isinstance(message, EraseRequest):
                    await self.erase_user(message.user_id, message, record)
                    return None
                if isinstance(message, SessionEnd):
                    for hook in self.session_end_hooks:
                        await hook(message)
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
                    await self.publish(output, result, key=message.user_id)
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
            router.publisher(self.topic(output), title=f"{self.service}:{output.value}")
            return fn

        return register

    # ------------------------------------------------------------------ lifecycle

    async def _startup(self) -> None:
        setup_logging(self.service, self.settings.log_level)
        setup_tracing(f"coachbus-{self.service}")
        log.info("%s: %s", self.service, describe(self.llm_settings))
        if self.llm is not None:
            # Load the tokenizer now, not inside the first turn's deadline.
            await asyncio.to_thread(self.prompt_builder)
        if self.kafka_io:
            await wait_for_broker(self.kafka)
            await ensure_topics(self.settings, self.kafka)
            # One consumer for all of this service's views (see ViewTail).
            self._view_tail = ViewTail(self.views, self.kafka)
            await self._view_tail.start()
        for hook in self.startup_hooks:
            await hook()
        for dispatcher in self.dispatchers:
            dispatcher.start_pacing()
        self._trimmer = asyncio.create_task(
            trim_forever(self.settings.malloc_trim_s), name="coachbus-memory-trim"
        )

    async def _shutdown(self) -> None:
        if self._trimmer is not None:
            self._trimmer.cancel()
        # Finish the work in hand and commit it before the consumers stop; what is
        # not finished stays uncommitted (never committed-but-lost).
        await asyncio.gather(*(d.close() for d in self.dispatchers))
        for hook in self.shutdown_hooks:
            await hook()
        if self._view_tail is not None:
            await self._view_tail.stop()
        if self._producer is not None:
            await self._producer.stop()
        if self.llm is not None:
            await self.llm.aclose()

    def include_router(self, router: KafkaRouter) -> None:
        """Attach a router to the broker once (a second time would double its handlers)."""
        if id(router) in self._routers:
            return
        self._routers.add(id(router))
        self.broker.include_router(router)

    def build_app(self, *routers: KafkaRouter, http_app: Any = None) -> CoachbusApp:
        """The service's app; ``http_app`` (an ASGI app) serves every other HTTP path."""
        for router in routers:
            self.include_router(router)
        return CoachbusApp(
            self.broker,
            service=self.service,
            http_app=http_app,
            port=self.settings.gateway_port
            if self.service == "gateway"
            else DEFAULT_PORTS[self.service],
            host=self.settings.host,
            asgi_routes=[
                ("/metrics", make_asgi_app(REGISTRY)),
                ("/healthz", make_ping_asgi(self.broker, timeout=5.0)),
            ],
            on_startup=[self._startup],
            on_shutdown=[self._shutdown],
            specification=AsyncAPI(
                title=f"coachbus {self.service}",
                version=__version__,
                description=f"The {self.service} service of the coachbus pipeline.",
            ),
        )


class CoachbusApp(AsgiFastStream):
    """AsgiFastStream serving on the service's own default port unless told otherwise
    (``faststream run --port/--host`` win)."""

    def __init__(
        self,
        *args: Any,
        service: str,
        port: int,
        host: str,
        http_app: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.service = service
        self.default_port = port
        self.default_host = host
        self.http_app = http_app

    async def not_found(self, scope: Any, receive: Any, send: Any) -> None:
        if self.http_app is not None and scope["type"] == "http":
            await self.http_app(scope, receive, send)
            return
        await super().not_found(scope, receive, send)

    async def run(
        self, log_level: int = logging.INFO, run_extra_options: dict[str, Any] | None = None
    ) -> None:
        options = dict(run_extra_options or {})
        options.setdefault("port", self.default_port)
        options.setdefault("host", self.default_host)
        await super().run(log_level, options)
