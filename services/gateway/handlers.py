"""Gateway wiring: the bus side (publish user messages, tail replies) for the API."""

from __future__ import annotations

import logging

from faststream.kafka import KafkaRouter
from opentelemetry.trace import SpanKind

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import EraseRequest, Reply, UserMessage
from coachbus.settings import generate_dev_key
from coachbus.topics import AGENT_TOPICS, Topic
from coachbus.tracing import turn_span
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.erasure import EraseDesk
from services.gateway.feed import ReplyFeed
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore

log = logging.getLogger(__name__)

runtime = AgentRuntime("gateway")
router = KafkaRouter()
publisher = router.publisher(
    runtime.topic(Topic.USER_MESSAGES),
    title="gateway:user-messages",
    description="Every accepted user message, keyed by user id.",
    schema=UserMessage,
)

if not runtime.settings.api_keys and runtime.settings.environment == "local":
    # Local convenience only: staging and production refuse to start without keys
    # (auth.refuse_without_keys, called by main).
    from coachbus.settings import ApiKey

    _dev = ApiKey(user_id="dev", key=generate_dev_key())  # type: ignore[arg-type]
    runtime.settings.api_keys.append(_dev)
    log.warning("no COACHBUS_API_KEYS set: generated a dev key for user 'dev'")

keys = KeyRing(runtime.settings.api_keys)
store = TurnStore(
    capacity=runtime.settings.turn_cache_turns,
    max_bytes=runtime.settings.turn_cache_mb * 1024 * 1024,
)
reviews = ReviewQueue()
desk = EraseDesk(runtime, store, reviews)
feed = ReplyFeed(
    runtime.kafka,
    store,
    reviews,
    replies_topic=runtime.topic(Topic.REPLIES),
    coach_replies_topic=runtime.topic(Topic.COACH_REPLIES),
    review_topic=runtime.topic(Topic.HUMAN_REVIEW),
    agent_topics=[runtime.topic(t) for t in AGENT_TOPICS.values()],
    desk=desk,
    confirmations_topic=runtime.topic(Topic.ERASE_CONFIRMATIONS),
)


async def publish(message: UserMessage | EraseRequest) -> None:
    # The turn's trace starts here; every agent and Synth continue it.
    with turn_span("gateway.accept", message.turn_id, "gateway", kind=SpanKind.PRODUCER):
        await runtime.publish(Topic.USER_MESSAGES, message, key=message.user_id)


async def publish_reply(reply: Reply) -> None:
    await runtime.publish(Topic.REPLIES, reply, key=reply.user_id)


async def _start_feed() -> None:
    if runtime.kafka_io:
        await feed.start()
        desk.start()


runtime.hooks.startup.append(_start_feed)
runtime.hooks.shutdown.append(feed.stop)
runtime.hooks.shutdown.append(desk.stop)
api = create_api(runtime.settings, keys, store, publish, reviews, publish_reply, desk)
