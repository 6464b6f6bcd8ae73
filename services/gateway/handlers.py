"""Gateway wiring: the bus side (publish user messages, tail replies) for the API."""

from __future__ import annotations

import asyncio
import logging

from faststream.kafka import KafkaRouter
from opentelemetry.trace import SpanKind

from coachbus.bus.codec import JSON_HEADERS, encode
from coachbus.bus.service import AgentRuntime
from coachbus.contracts import EraseRequest, Reply, ReviewAction, ReviewAuditEvent, UserMessage
from coachbus.safety.helplines import Helplines
from coachbus.settings import generate_dev_key
from coachbus.topics import AGENT_TOPICS, Topic
from coachbus.tracing import inject_headers, turn_span
from services.gateway import review_content
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.erasure import EraseDesk
from services.gateway.feed import ReplyFeed
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import ANSWER_HEADER, ReviewBus, ReviewDesk
from services.gateway.review_settings import ReviewSettings
from services.gateway.review_webhook import ReviewWebhook
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
review_settings = ReviewSettings()
if review_settings.webhook_url is not None and review_settings.webhook_secret is None:
    if runtime.settings.environment != "local":
        # An unsigned call could come from anyone: a receiver cannot trust it.
        raise SystemExit(
            "COACHBUS_REVIEW_WEBHOOK_URL is set without COACHBUS_REVIEW_WEBHOOK_SECRET; "
            f"refusing to start the gateway in {runtime.settings.environment}"
        )
    log.warning("review webhook without a secret: calls are not signed")
webhook = (
    ReviewWebhook(
        str(review_settings.webhook_url),
        review_settings.webhook_secret,
        attempts=review_settings.webhook_attempts,
        timeout_s=review_settings.webhook_timeout_s,
        backoff_s=review_settings.webhook_backoff_s,
    )
    if review_settings.webhook_url is not None
    else None
)


async def publish_action(action: ReviewAction) -> None:
    # Keyed by the item: all of one item's actions in one partition, in one order.
    await runtime.publish(Topic.REVIEW_ACTIONS, action, key=action.item_id)


async def publish_audit(event: ReviewAuditEvent) -> None:
    await runtime.publish(Topic.REVIEW_AUDIT, event, key=event.item_id)


async def publish_human_reply(reply: Reply, answer_id: str) -> None:
    # Keyed by the person like every reply; the header names the answer it delivers.
    headers = {**inject_headers(JSON_HEADERS), ANSWER_HEADER: answer_id}
    await runtime.broker.publish(
        encode(reply), runtime.topic(Topic.REPLIES), key=reply.user_id.encode(), headers=headers
    )


review_desk = ReviewDesk(
    reviews,
    store,
    ReviewBus(action=publish_action, audit=publish_audit, reply=publish_human_reply),
    settings=review_settings,
    content=review_content.shipped(),
    helplines=Helplines.configured(runtime.settings.helplines_file, runtime.settings.locale),
    erasures=runtime.erasures,
    webhook=webhook,
)
desk = EraseDesk(runtime, store, reviews, review_desk=review_desk)
feed = ReplyFeed(
    runtime.kafka,
    store,
    review_desk,
    replies_topic=runtime.topic(Topic.REPLIES),
    coach_replies_topic=runtime.topic(Topic.COACH_REPLIES),
    review_topic=runtime.topic(Topic.HUMAN_REVIEW),
    agent_topics=[runtime.topic(t) for t in AGENT_TOPICS.values()],
    desk=desk,
    confirmations_topic=runtime.topic(Topic.ERASE_CONFIRMATIONS),
    review_actions_topic=runtime.topic(Topic.REVIEW_ACTIONS),
    user_messages_topic=runtime.topic(Topic.USER_MESSAGES),
)
# Declared for the generated AsyncAPI document (docs/asyncapi/gateway.json).
router.publisher(
    runtime.topic(Topic.REVIEW_ACTIONS),
    title="gateway:review-actions",
    description="Reviewers' claims, answers and closes, keyed by the item (turn id).",
)
router.publisher(
    runtime.topic(Topic.REVIEW_AUDIT),
    title="gateway:review-audit",
    description="Every reviewer action and its verdict, without anyone's words.",
)
METRICS_EVERY_S = 5.0


async def publish(message: UserMessage | EraseRequest) -> None:
    # The turn's trace starts here; every agent and Synth continue it.
    with turn_span("gateway.accept", message.turn_id, "gateway", kind=SpanKind.PRODUCER):
        await runtime.publish(Topic.USER_MESSAGES, message, key=message.user_id)


async def publish_reply(reply: Reply) -> None:
    await runtime.publish(Topic.REPLIES, reply, key=reply.user_id)


async def _review_metrics() -> None:
    # The oldest item's age grows with the clock, not with records: refresh it often.
    while True:
        review_desk.refresh_metrics()
        await asyncio.sleep(METRICS_EVERY_S)


_tasks: list[asyncio.Task[None]] = []


async def _start_feed() -> None:
    if runtime.kafka_io:
        await feed.start()
        desk.start()
    _tasks.append(asyncio.create_task(_review_metrics(), name="gateway-review-metrics"))


async def _stop_review() -> None:
    for task in _tasks:
        task.cancel()
    await review_desk.close()


runtime.hooks.startup.append(_start_feed)
runtime.hooks.shutdown.append(feed.stop)
runtime.hooks.shutdown.append(desk.stop)
runtime.hooks.shutdown.append(_stop_review)
api = create_api(
    runtime.settings,
    keys,
    store,
    publish,
    review_desk,
    publish_reply,
    desk,
    review=review_settings,
)
