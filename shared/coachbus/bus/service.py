"""The runtime one service runs on.

A service's ``handlers.py`` creates an :class:`AgentRuntime`, a FastStream
``KafkaRouter`` and registers its typed handler (message in, result out); its
``main.py`` builds the app with :meth:`AgentRuntime.build_app`. The runtime is put
together from the parts every service needs:

* writing (:mod:`coachbus.bus.publish`): events, tombstones, dead letters;
* state (:mod:`coachbus.bus.service_state`): owned stores loaded on partition
  assignment, views, erase watermarks;
* reading (:mod:`coachbus.bus.consume`): key-ordered dispatch with at-least-once
  commits behind each subscription, the agent handler;
* thinking (:mod:`coachbus.llm`): the deterministic tier always, LLM tiers when an
  endpoint is configured;
* the moments a service joins (:mod:`coachbus.bus.hooks`) and its app with metrics
  and health on one port (:mod:`coachbus.bus.app`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from faststream.kafka import KafkaBroker, KafkaRouter
from faststream.kafka.prometheus import KafkaPrometheusMiddleware
from pydantic import BaseModel

from coachbus.bus.admin import ensure_topics, wait_for_broker
from coachbus.bus.app import CoachbusApp, make_app
from coachbus.bus.consume import Subscriptions
from coachbus.bus.dispatch import Hold, KeyedDispatcher, Record
from coachbus.bus.hooks import RuntimeHooks
from coachbus.bus.publish import Publisher
from coachbus.bus.service_state import ServiceState
from coachbus.bus.state import OwnedStore, TableView
from coachbus.contracts import EraseRequest, Event, UserMessage
from coachbus.llm import LLMClient, LLMSettings, Policy, PromptBuilder, Router, describe
from coachbus.logs import setup_logging
from coachbus.memory_trim import trim_forever
from coachbus.metrics import REGISTRY
from coachbus.settings import (
    CoachbusSettings,
    KafkaSettings,
    faststream_security,
    get_kafka_settings,
    get_settings,
)
from coachbus.topics import Topic
from coachbus.tracing import setup_tracing

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Event)
S = TypeVar("S", bound=BaseModel)


class AgentRuntime:
    """One service's runtime: its broker, hooks, publisher, state and subscriptions,
    and its LLM tiers. The methods below are what a service's handlers use; each
    hands the call to the part that does it."""

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
        self.broker = KafkaBroker(
            self.kafka.servers,
            client_id=f"coachbus-{service}",
            security=faststream_security(self.kafka),  # type: ignore[arg-type]
            middlewares=(KafkaPrometheusMiddleware(registry=REGISTRY, app_name="coachbus"),),
            allow_auto_create_topics=False,
            logger=logging.getLogger(f"coachbus.{service}"),
        )
        self.hooks = RuntimeHooks()
        self.publisher = Publisher(service, self.broker, settings=self.settings, kafka=self.kafka)
        self.state = ServiceState(
            service,
            settings=self.settings,
            kafka=self.kafka,
            hooks=self.hooks,
            publisher=self.publisher,
        )
        self.subscriptions = Subscriptions(
            service,
            settings=self.settings,
            kafka=self.kafka,
            hooks=self.hooks,
            state=self.state,
            publisher=self.publisher,
        )
        # Every user's erase watermark: a service checks a turn against it before it
        # writes anything of it (Synth before it answers).
        self.erasures = self.state.erasures
        # How this service thinks: the deterministic tier always, LLM tiers when an
        # endpoint is configured; ``tiers`` (the LLM router, not a FastStream router)
        # picks the cheapest that carries a decision.
        self.llm_settings = LLMSettings()
        self.llm = LLMClient(self.llm_settings) if self.llm_settings.enabled else None
        self.tiers = Router(
            policy=Policy.load(self.llm_settings.policy_file),
            client=self.llm,
            publish_human_review=self.publisher.publish_review,
        )
        self._prompt_builder: PromptBuilder | None = None
        self._routers: set[int] = set()
        self._trimmer: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ what services use

    def topic(self, topic: Topic) -> str:
        return self.settings.topic(topic.value)

    @property
    def kafka_io(self) -> bool:
        """Whether the runtime talks to a broker; tests without one (FastStream's
        TestKafkaBroker) switch it off."""
        return self.state.kafka_io

    @kafka_io.setter
    def kafka_io(self, on: bool) -> None:
        self.state.kafka_io = on

    @property
    def dispatchers(self) -> list[KeyedDispatcher]:
        return self.subscriptions.dispatchers

    async def publish(self, topic: Topic | str, event: BaseModel, *, key: str) -> None:
        await self.publisher.publish(topic, event, key=key)

    async def publish_located(self, topic: Topic, event: BaseModel, *, key: str) -> tuple[int, int]:
        return await self.publisher.publish_located(topic, event, key=key)

    async def tombstone(self, topic: Topic, key: str) -> None:
        await self.publisher.tombstone(topic, key)

    async def dead_letter(self, record: Record, reason: str, error_type: str) -> None:
        await self.publisher.dead_letter(record, reason, error_type)

    def owned_store(self, topic: Topic, model: type[S]) -> OwnedStore[S]:
        return self.state.owned_store(topic, model)

    def table_view(self, topic: Topic, model: type[S]) -> TableView[S]:
        return self.state.table_view(topic, model)

    async def erase_user(
        self, user_id: str, request: EraseRequest | None = None, record: Record | None = None
    ) -> None:
        await self.state.erase_user(user_id, request, record)

    def consume(
        self,
        router: KafkaRouter,
        topics: Sequence[Topic],
        handle: Callable[[Record], Awaitable[Hold | None]],
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> KeyedDispatcher:
        return self.subscriptions.consume(
            router, topics, handle, title=title, description=description
        )

    def agent(
        self,
        router: KafkaRouter,
        *,
        output: Topic,
        input_topic: Topic = Topic.USER_MESSAGES,
    ) -> Callable[[Callable[[UserMessage], Awaitable[R]]], Callable[[UserMessage], Awaitable[R]]]:
        return self.subscriptions.agent(router, output=output, input_topic=input_topic)

    def prompt_builder(self) -> PromptBuilder:
        """The agent's prompt builder, made once: its token counter loads a tokenizer."""
        if self._prompt_builder is None:
            self._prompt_builder = PromptBuilder(self.llm_settings)
        return self._prompt_builder

    # ------------------------------------------------------------------ lifecycle

    async def startup(self) -> None:
        """Before the broker starts its consumers (the app's on_startup)."""
        setup_logging(self.service, self.settings.log_level)
        setup_tracing(f"coachbus-{self.service}")
        log.info("%s: %s", self.service, describe(self.llm_settings))
        if self.llm is not None:
            # Load the tokenizer now, not inside the first turn's deadline.
            await asyncio.to_thread(self.prompt_builder)
        if self.kafka_io:
            await wait_for_broker(self.kafka)
            await ensure_topics(self.settings, self.kafka)
            await self.state.start_views()
        await self.hooks.startup.run()
        for dispatcher in self.dispatchers:
            dispatcher.start_pacing()
        self._trimmer = asyncio.create_task(
            trim_forever(self.settings.malloc_trim_s), name="coachbus-memory-trim"
        )

    async def shutdown(self) -> None:
        """When the app stops, before the broker's consumers do (the app's on_shutdown)."""
        if self._trimmer is not None:
            self._trimmer.cancel()
        # Finish the work in hand and commit it before the consumers stop; what is
        # not finished stays uncommitted (never committed-but-lost).
        await asyncio.gather(*(d.close() for d in self.dispatchers))
        await self.hooks.shutdown.run()
        await self.state.stop_views()
        await self.publisher.close()
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
        return make_app(
            self.service,
            self.broker,
            self.settings,
            on_startup=self.startup,
            on_shutdown=self.shutdown,
            http_app=http_app,
        )
