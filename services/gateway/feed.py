"""Tails the replies and agent topics (all partitions, no consumer group) into the
turn store. Every gateway replica sees every turn, so any replica can answer.

Erasure: a record of a turn begun before its user's erase watermark is dropped
here, whether it arrives late (the turn was in flight) or is re-read after a
restart (the review and replies tails); the watermarks are all read before the
first record is judged. Erase confirmations are tailed from the beginning, so any
replica can tell whether an erase is complete."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import TypeAdapter

from coachbus.bus.codec import DecodeError, decode
from coachbus.bus.state import fetched_ends, tail_batches
from coachbus.contracts import (
    AgentResultAdapter,
    EraseConfirmation,
    HumanReviewRequest,
    Reply,
    ReviewActionAdapter,
    UserInputAdapter,
    UserMessage,
)
from coachbus.metrics import MESSAGES
from coachbus.settings import KafkaSettings
from services.gateway.erasure import EraseDesk
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import ANSWER_HEADER, ReviewDesk
from services.gateway.turns import TurnStore

log = logging.getLogger(__name__)
_replies: TypeAdapter[Reply] = TypeAdapter(Reply)
_reviews: TypeAdapter[HumanReviewRequest] = TypeAdapter(HumanReviewRequest)
_confirmations: TypeAdapter[EraseConfirmation] = TypeAdapter(EraseConfirmation)
MAX_BYTES = 4 * 1024 * 1024
# ``replies`` carries a turn's streamed sentences (final_delta) beside its final:
# several records a turn, so its re-read tail is this many times the review
# topic's to reach as far back in turns (a human answer still closes its review).
REPLIES_PER_TURN = 8
_DELTA = b'"kind":"final_delta"'
# The reply kinds each topic may carry: ``replies`` (Synth's finals and their
# streamed sentences, the review endpoint's human answers) and ``coach-replies``
# (Coach's pieces).
_KINDS_FROM: dict[bool, frozenset[str]] = {
    True: frozenset({"final", "final_delta", "human"}),
    False: frozenset({"coach", "coach_delta"}),
}


class ReplyFeed:
    def __init__(
        self,
        kafka: KafkaSettings,
        store: TurnStore,
        reviews: ReviewQueue | ReviewDesk,
        *,
        replies_topic: str,
        review_topic: str,
        coach_replies_topic: str | None = None,
        agent_topics: list[str],
        desk: EraseDesk | None = None,
        confirmations_topic: str | None = None,
        review_lookback: int = 2_000,
        review_actions_topic: str | None = None,
        user_messages_topic: str | None = None,
    ) -> None:
        self._kafka = kafka
        self._store = store
        # The human tier: a desk folds reviewers' actions too; a bare queue (tests of
        # the feed alone) only collects escalations.
        self._review_desk = reviews if isinstance(reviews, ReviewDesk) else None
        self._reviews = reviews.queue if isinstance(reviews, ReviewDesk) else reviews
        self._desk = desk
        self._replies_topic = replies_topic
        self._review_topic = review_topic
        self._confirmations_topic = confirmations_topic if desk is not None else None
        self._coach_replies_topic = coach_replies_topic
        self._topics = [replies_topic, review_topic, *agent_topics]
        if coach_replies_topic is not None:
            self._topics.append(coach_replies_topic)
        if self._confirmations_topic is not None:
            self._topics.append(self._confirmations_topic)
        self._actions_topic = review_actions_topic if self._review_desk is not None else None
        if self._actions_topic is not None:
            self._topics.append(self._actions_topic)
        self._messages_topic = user_messages_topic
        if user_messages_topic is not None:
            self._topics.append(user_messages_topic)
        self._review_lookback = review_lookback
        # Per re-read partition, where the live tail began: a final_delta before it
        # was re-read with the lookback and is of no use to anyone any more, and the
        # human tier acts only on what it reads live (a re-read is history).
        self._live_from: dict[TopicPartition, int] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._pacer = kafka.pacer()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kafka = self._kafka
        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.servers,
            enable_auto_commit=False,
            fetch_max_wait_ms=kafka.fetch_max_wait_ms,
            **kafka.client_kwargs(),
        )
        await consumer.start()
        await consumer._client.force_metadata_update()
        tps = [
            TopicPartition(topic, p)
            for topic in self._topics
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        consumer.assign(tps)
        # The ends as the broker's fetches report them: its ListOffsets answer may lie
        # behind the records it serves (coachbus.bus.state.at_end), which would make
        # replies already sent look live. A reply published after this returns is seen.
        await consumer.seek_to_beginning(*tps)
        ends = await fetched_ends(consumer, tps)
        for tp in tps:
            end = ends[tp]
            consumer.seek(tp, end)
            if tp.topic == self._confirmations_topic:
                consumer.seek(tp, 0)  # one record per owner per erase: all of them
            elif tp.topic == self._actions_topic:
                # Every claim, answer and close: the fold is the whole log, so each
                # replica (and this one after a restart) reaches the same verdicts.
                self._live_from[tp] = end
                consumer.seek(tp, 0)
            elif tp.topic in (self._review_topic, self._messages_topic):
                # Open reviews (and the human answers that closed them) outlive a
                # restart: re-read a recent tail of both topics, and of what people
                # wrote (a reviewer sees the item's session).
                self._live_from[tp] = end
                consumer.seek(tp, max(0, end - self._review_lookback))
            elif tp.topic == self._replies_topic:
                self._live_from[tp] = end
                consumer.seek(tp, max(0, end - self._review_lookback * REPLIES_PER_TURN))
        self._store.on_sent = self._pace
        if self._review_desk is not None:
            self._review_desk.on_act = self._pace
        self._task = asyncio.create_task(self._run(consumer), name="gateway-feed")

    def _pace(self) -> None:
        # Many turns in flight: fetch less often; none for a while: idle (see
        # coachbus.bus.pacing). A turn sent ends the idleness before its first fetch.
        if self._consumer is not None:
            awaiting = self._review_desk.awaiting if self._review_desk is not None else 0
            self._pacer.apply(self._consumer, self._store.in_flight + awaiting)

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        erasures = self._desk.erasures if self._desk is not None else None
        if erasures is not None:
            # Judge nothing (a re-read crisis excerpt above all) before every
            # watermark is known.
            await erasures.caught_up.wait()
        async for batch in tail_batches(consumer):
            self._pace()
            # Replies last: a final in the same batch as its agents' results then
            # follows them (the store still holds a final that arrives earlier).
            for tp, records in sorted(
                batch.items(), key=lambda item: item[0].topic == self._replies_topic
            ):
                for record in records:
                    if tp.topic == self._confirmations_topic:
                        self._confirm(record.value)
                        continue
                    live_from = self._live_from.get(tp)
                    if (
                        tp.topic == self._replies_topic
                        and live_from is not None
                        and record.offset < live_from
                        and record.value is not None
                        and _DELTA in record.value
                    ):
                        continue  # a streamed sentence of a turn long answered
                    if (
                        erasures is not None
                        and tp.topic != self._actions_topic  # keyed by item: see below
                        and erasures.drops(record.key, record.value)
                    ):
                        continue  # a turn begun before its user's erase
                    live = live_from is None or record.offset >= live_from
                    try:
                        if tp.topic in (self._replies_topic, self._coach_replies_topic):
                            reply = decode(record.value, _replies, max_bytes=MAX_BYTES)
                            if reply.kind not in _KINDS_FROM[tp.topic == self._replies_topic]:
                                # Not a kind this topic's writer may send (a Coach
                                # credential forging a final or a human answer).
                                log.warning("gateway: %s reply on %s ignored", reply.kind, tp.topic)
                                continue
                            if reply.kind == "human" and not _answers(record):
                                # An answer sent before claims existed closed its item.
                                self._reviews.resolve(reply.turn_id)
                            await self._store.add_reply(reply)
                        elif tp.topic == self._review_topic:
                            request = decode(record.value, _reviews, max_bytes=MAX_BYTES)
                            if self._review_desk is not None:
                                await self._review_desk.add_request(request, live=live)
                            else:
                                self._reviews.add(request)
                        elif tp.topic == self._actions_topic:
                            # Keyed by the item, not the person: the desk checks the
                            # person's erase itself.
                            assert self._review_desk is not None
                            action = decode(record.value, ReviewActionAdapter, max_bytes=MAX_BYTES)
                            await self._review_desk.fold(action, live=live)
                        elif tp.topic == self._messages_topic:
                            said = decode(record.value, UserInputAdapter, max_bytes=MAX_BYTES)
                            if isinstance(said, UserMessage):
                                self._store.add_message(said)
                        else:
                            await self._store.add_result(
                                decode(record.value, AgentResultAdapter, max_bytes=MAX_BYTES)
                            )
                    except DecodeError as exc:
                        if tp.topic == self._actions_topic:
                            # Only gateways write review actions, and no consumer group
                            # reads them to dead-letter: every replica skips the record
                            # alike (the fold stays the same everywhere) and says so.
                            MESSAGES.labels("gateway", tp.topic, "unreadable").inc()
                            log.warning("gateway: unreadable review action skipped: %s", exc.reason)
                            continue
                        # Not ours to dead-letter (the producers' consumers do that);
                        # the view simply does not show it.
                        log.debug("gateway: skipped unreadable record: %s", exc.reason)

    def _confirm(self, value: bytes | None) -> None:
        if self._desk is None:
            return
        try:
            self._desk.confirm(decode(value, _confirmations, max_bytes=MAX_BYTES))
        except DecodeError as exc:
            log.debug("gateway: skipped unreadable erase confirmation: %s", exc.reason)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


def _answers(record: object) -> bool:
    """Whether a human reply delivers an answer of the review log (its header)."""
    headers = getattr(record, "headers", None) or ()
    return any(name == ANSWER_HEADER for name, _value in headers)
