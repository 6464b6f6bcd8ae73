"""The feed's side of the human tier, without a broker: review actions folded in log
order (a re-read is history, an unreadable record skipped alike on every replica),
human replies that deliver an answer, and an answer whose replica stopped before
sending it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import SimpleNamespace

import pytest
from aiokafka import TopicPartition

from coachbus.bus.codec import encode
from coachbus.contracts import (
    AnswerAction,
    ClaimAction,
    HumanReviewRequest,
    Reply,
    new_turn_id,
    utcnow,
)
from coachbus.metrics import MESSAGES
from coachbus.safety.helplines import Helplines
from coachbus.settings import KafkaSettings
from services.gateway import review_content
from services.gateway.feed import ReplyFeed
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import ANSWER_HEADER, LoopbackBus, ReviewDesk
from services.gateway.review_settings import ReviewSettings
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit


def desk_with(store: TurnStore, log: LoopbackBus, **kwargs: object) -> ReviewDesk:
    desk = ReviewDesk(
        ReviewQueue(),
        store,
        log.bus,
        settings=ReviewSettings(),
        content=review_content.shipped(),
        helplines=Helplines.configured(None, None),
        **kwargs,  # type: ignore[arg-type]
    )
    log.desk = desk
    return desk


def escalation(user: str = "bob") -> HumanReviewRequest:
    return HumanReviewRequest(
        turn_id=new_turn_id(),
        session_id="s",
        user_id=user,
        decision="risk_screen",
        reason="test",
        severity="critical",
        excerpt="I can't go on.",
    )


def ids(item: HumanReviewRequest, reviewer: str, replica: str) -> dict[str, object]:
    return {
        "item_id": item.turn_id,
        "user_id": item.user_id,
        "session_id": item.session_id,
        "reviewer_id": reviewer,
        "replica": replica,
    }


class Batches:
    """A consumer that returns the given batches, then waits."""

    def __init__(self, *batches: dict[TopicPartition, list[object]]) -> None:
        self.batches = list(batches)
        self.fetches = 0

    def assignment(self) -> set[TopicPartition]:
        return set()

    async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[object]]:
        self.fetches += 1
        if not self.batches:
            await asyncio.sleep(3600)
        return self.batches.pop(0)


def record(value: bytes, offset: int, key: bytes = b"k", **extra: object) -> SimpleNamespace:
    return SimpleNamespace(value=value, key=key, offset=offset, headers=(), **extra)


async def run(feed: ReplyFeed, consumer: Batches) -> None:
    task = asyncio.create_task(feed._run(consumer))  # type: ignore[arg-type]
    try:
        async with asyncio.timeout(5):
            while consumer.batches or consumer.fetches == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
    finally:
        task.cancel()


async def test_actions_are_folded_in_log_order_and_a_reread_is_history() -> None:
    store, log = TurnStore(), LoopbackBus()
    desk = desk_with(store, log)
    item = escalation()
    now = utcnow()
    old_claim = ClaimAction(**ids(item, "carol", "gone"), at=now, expires_at=now + timedelta(1))  # type: ignore[arg-type]
    late = ClaimAction(**ids(item, "rita", "other"), at=now, expires_at=now + timedelta(1))  # type: ignore[arg-type]
    actions, reviews = TopicPartition("review-actions", 0), TopicPartition("human-review", 0)
    feed = ReplyFeed(
        KafkaSettings(),
        store,
        desk,
        replies_topic="replies",
        review_topic="human-review",
        agent_topics=[],
        review_actions_topic="review-actions",
    )
    # Where this replica's live tail began: offset 1 on review-actions.
    feed._live_from[actions] = 1
    feed._live_from[reviews] = 0
    unreadable = MESSAGES.labels("gateway", "review-actions", "unreadable")._value.get()
    await run(
        feed,
        Batches(
            {
                actions: [
                    record(encode(old_claim), 0),
                    record(b'{"action": "claim"}', 1),
                    record(encode(late), 2),
                ],
                reviews: [record(encode(item), 0, key=b"bob")],
            }
        ),
    )
    state = desk.ledger.get(item.turn_id)
    assert state is not None and state.holder == "carol"
    assert [(e.reviewer_id, e.accepted) for e in state.history] == [
        ("carol", True),
        ("rita", False),
    ]
    assert MESSAGES.labels("gateway", "review-actions", "unreadable")._value.get() == unreadable + 1
    assert desk.queue.get(item.turn_id) is not None
    # Neither was this replica's, and the first was history: nothing was published.
    assert log.audits == [] and log.replies == []


async def test_a_reply_delivering_an_answer_leaves_the_item_open_and_an_old_one_closes_it() -> None:
    store, log = TurnStore(), LoopbackBus()
    desk = desk_with(store, log)
    answered, legacy = escalation(), escalation()
    for item in (answered, legacy):
        await desk.add_request(item, live=False)

    def human(item: HumanReviewRequest) -> bytes:
        reply = Reply(turn_id=item.turn_id, session_id="s", user_id="bob", kind="human", text="hi")
        return encode(reply)

    replies = TopicPartition("replies", 0)
    feed = ReplyFeed(
        KafkaSettings(),
        store,
        desk,
        replies_topic="replies",
        review_topic="human-review",
        agent_topics=[],
        review_actions_topic="review-actions",
    )
    await run(
        feed,
        Batches(
            {
                replies: [
                    SimpleNamespace(
                        value=human(answered),
                        key=b"bob",
                        offset=0,
                        headers=((ANSWER_HEADER, b"a1"),),
                    ),
                    record(human(legacy), 1, key=b"bob"),
                ]
            }
        ),
    )
    assert desk.queue.get(answered.turn_id) is not None  # closed by a close, not a reply
    assert desk.queue.get(legacy.turn_id) is None  # answered before claims existed


async def test_an_accepted_answer_never_sent_is_sent_by_another_replica() -> None:
    store, log = TurnStore(), LoopbackBus()
    desk = desk_with(store, log, reply_grace_s=0.05)
    sent, lost = escalation(), escalation()
    now = utcnow()
    for item in (sent, lost):
        await desk.add_request(item, live=True)
        claim = ClaimAction(**ids(item, "carol", "r1"), at=now, expires_at=now + timedelta(1))  # type: ignore[arg-type]
        await desk.fold(claim, live=True)
        answer = AnswerAction(
            **ids(item, "carol", "r1"),  # type: ignore[arg-type]
            at=now,
            expires_at=now + timedelta(1),
            text=f"answer to {item.turn_id}",
        )
        if item is sent:
            # Replica r1 sent this one: the feed brought it here.
            await store.add_reply(
                Reply(
                    turn_id=item.turn_id,
                    session_id="s",
                    user_id="bob",
                    kind="human",
                    text=answer.text,
                    created_at=answer.at,
                )
            )
        await desk.fold(answer, live=True)
    await asyncio.sleep(0.3)
    ((reply, answer_id),) = log.replies
    assert reply.turn_id == lost.turn_id and reply.created_at == now
    assert answer_id  # the answer it delivers, for readers to recognise a second copy
    await desk.close()
