"""How one service writes to the bus: events, tombstones and dead letters.

Every write waits for the broker's acknowledgement (at-least-once: an offset is
committed only after what it produced is on the bus) and carries the current trace
context, so one trace spans a whole turn across the services.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

from aiokafka import AIOKafkaProducer
from faststream.kafka import KafkaBroker
from pydantic import BaseModel, TypeAdapter

from coachbus.bus.codec import JSON_HEADERS, encode
from coachbus.bus.dispatch import Record
from coachbus.contracts import DLQ_ORIGINAL_MAX, DeadLetter, HumanReviewRequest
from coachbus.metrics import DLQ_MESSAGES, MESSAGES
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic
from coachbus.tracing import inject_headers

log = logging.getLogger(__name__)


class Publisher:
    """Writes of one service: through its FastStream broker, and through a plain
    aiokafka producer where FastStream cannot (a null value, the record's offset)."""

    def __init__(
        self,
        service: str,
        broker: KafkaBroker,
        *,
        settings: CoachbusSettings,
        kafka: KafkaSettings,
    ) -> None:
        self.service = service
        self._broker = broker
        self._settings = settings
        self._kafka = kafka
        # Made on first use: only tombstones and located publishes need it.
        self._producer: AIOKafkaProducer | None = None

    def _name(self, topic: Topic | str) -> str:
        return self._settings.topic(topic.value) if isinstance(topic, Topic) else topic

    async def publish(self, topic: Topic | str, event: BaseModel, *, key: str) -> None:
        """Publish and wait for the broker's acknowledgement (at-least-once)."""
        await self._broker.publish(
            encode(event), self._name(topic), key=key.encode(), headers=inject_headers(JSON_HEADERS)
        )

    async def publish_review(self, request: HumanReviewRequest) -> None:
        """Put a decision before a human (the LLM router's escalation)."""
        await self.publish(Topic.HUMAN_REVIEW, request, key=request.user_id)

    async def _plain_producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            self._producer = AIOKafkaProducer(
                bootstrap_servers=self._kafka.servers, **self._kafka.client_kwargs()
            )
            await self._producer.start()
        return self._producer

    async def write_raw(self, topic: str, value: bytes | None, key: str) -> None:
        """Write an encoded record to a state topic; ``None`` writes a tombstone."""
        if value is not None:
            await self._broker.publish(value, topic, key=key.encode(), headers=JSON_HEADERS)
            return
        # FastStream encodes None as b"", which compaction keeps as a value: a real
        # tombstone needs a null value, so it goes through aiokafka directly.
        producer = await self._plain_producer()
        await producer.send_and_wait(topic, None, key=key.encode())

    async def tombstone(self, topic: Topic, key: str) -> None:
        """Write a real tombstone (null value) for ``key`` on a compacted topic."""
        await self.write_raw(self._name(topic), None, key)

    async def publish_located(self, topic: Topic, event: BaseModel, *, key: str) -> tuple[int, int]:
        """Publish like ``publish`` and return where the record landed (partition,
        offset): an erase receipt names its place in the user's partition."""
        producer = await self._plain_producer()
        headers = [(k, v.encode()) for k, v in inject_headers(JSON_HEADERS).items()]
        meta = await producer.send_and_wait(
            self._name(topic), encode(event), key=key.encode(), headers=headers
        )
        return meta.partition, meta.offset

    async def dead_letter(self, record: Record, reason: str, error_type: str) -> None:
        """Park a record no handler can use on the dead-letter topic, with the reason
        and as much of the original as fits, so its partition moves on."""
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

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
