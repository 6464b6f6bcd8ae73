"""Topic administration: idempotent creation with a configured partition count."""

from __future__ import annotations

import asyncio
import logging
import time

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError

from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import TopicSpec, all_topic_specs

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36


async def wait_for_broker(kafka: KafkaSettings, timeout_s: float = 30.0) -> None:
    """Block until the broker answers metadata requests (it may still be starting)."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=kafka.servers, request_timeout_ms=3000, **kafka.client_kwargs()
        )
        try:
            await admin.start()
            await admin.list_topics()
            return
        except (KafkaConnectionError, KafkaError, OSError) as exc:
            last = exc
            await asyncio.sleep(0.2)
        finally:
            await admin.close()
    raise TimeoutError(f"broker at {kafka.servers} did not answer within {timeout_s}s: {last}")


async def ensure_topics(
    settings: CoachbusSettings, kafka: KafkaSettings, specs: list[TopicSpec] | None = None
) -> list[str]:
    """Create every missing topic; an existing one is left alone. Returns the created names."""
    specs = specs if specs is not None else all_topic_specs(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.servers, **kafka.client_kwargs())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        missing = [s for s in specs if s.name not in existing]
        created: list[str] = []
        if missing:
            response = await admin.create_topics(
                [
                    NewTopic(
                        s.name,
                        num_partitions=s.partitions,
                        replication_factor=s.replication_factor,
                        topic_configs=s.config,
                    )
                    for s in missing
                ]
            )
            for name, code, message in response.topic_errors:
                if code == 0:
                    created.append(name)
                elif code != TOPIC_ALREADY_EXISTS:  # a concurrent creator won the race
                    raise RuntimeError(f"could not create topic {name}: {code} {message}")
        if created:
            log.info("created topics: %s", ", ".join(created))
        await _check_partitions(admin, specs)
        return created
    finally:
        await admin.close()


async def _check_partitions(admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> None:
    """Co-partitioning is what keeps one writer per user: refuse mismatched topics."""
    described = await admin.describe_topics([s.name for s in specs])
    counts = {d["topic"]: len(d["partitions"]) for d in described if d.get("partitions")}
    wrong = {
        s.name: counts[s.name] for s in specs if s.name in counts and counts[s.name] != s.partitions
    }
    if wrong:
        raise RuntimeError(
            "topics exist with a partition count other than COACHBUS_PARTITIONS; user state "
            f"would no longer be co-partitioned: {wrong}"
        )
