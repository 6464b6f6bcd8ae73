"""Retention and compaction settings reach the broker, and drift is reported.

The embedded Tansu keeps records in memory only and never deletes or compacts
them, whatever the settings: what it does do is store the configs a topic is
created with and return them from DescribeConfigs. So these tests show that the
settings are sent and read back where the broker keeps them; they cannot show a
record expiring. Tansu does not implement AlterConfigs: fixing drift there fails
with a clear error (on Kafka the same call alters the topics).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from coachbus.bus.admin import (
    ConfigFixUnsupported,
    config_drift,
    describe_topic_configs,
    ensure_topics,
    fix_config_drift,
)
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import COMPACTED, Topic, topic_name

pytestmark = pytest.mark.broker


async def _configs(kafka: KafkaSettings, names: list[str]) -> dict[str, dict[str, str | None]]:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.servers)
    await admin.start()
    try:
        described = await describe_topic_configs(admin, names)
    finally:
        await admin.close()
    return {name: {k: v for k, (v, _src) in cfg.items()} for name, cfg in described.items()}


async def test_created_topics_carry_retention_and_compaction_bounds(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = CoachbusSettings(
        topic_prefix=topic_prefix, partitions=2, retention_ms=5 * 86_400_000
    )
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    await ensure_topics(settings, kafka)
    configs = await _configs(kafka, [topic_name(settings, t) for t in Topic])

    for topic in Topic:
        cfg = configs[topic_name(settings, topic)]
        if topic in COMPACTED:
            assert cfg["cleanup.policy"] == "compact"
            assert cfg["max.compaction.lag.ms"] == "86400000"
            assert cfg["delete.retention.ms"] == "86400000"
            assert cfg["segment.ms"] == "86400000"
        else:
            assert cfg["cleanup.policy"] == "delete"
            expected = {
                Topic.DLQ: "259200000",
                Topic.REVIEW_AUDIT: str(settings.review_audit_retention_ms),
            }.get(topic, str(5 * 86_400_000))
            assert cfg["retention.ms"] == expected, topic
            assert cfg["segment.ms"] == "86400000"
    assert await config_drift(settings, kafka) == []


async def test_drift_on_an_existing_topic_is_reported_and_fix_says_what_it_cannot(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=2)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    # A cluster from before retention: the replies topic exists without any settings.
    replies = topic_name(settings, Topic.REPLIES)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(replies, 2, 1)])
    finally:
        await admin.close()

    created = await ensure_topics(settings, kafka)
    assert replies not in created  # left alone by creation...
    drift = await config_drift(settings, kafka)
    assert {(d.topic, d.key) for d in drift} == {  # ...and reported as drift
        (replies, "cleanup.policy"),
        (replies, "retention.ms"),
        (replies, "segment.ms"),
    }
    assert all(d.actual is None for d in drift)
    with pytest.raises(ConfigFixUnsupported, match="AlterConfigs"):
        await fix_config_drift(settings, kafka, drift)


async def test_cli_exits_2_on_drift(kafka_bootstrap: str, topic_prefix: str) -> None:
    settings = CoachbusSettings(topic_prefix=topic_prefix, partitions=2)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic_name(settings, Topic.DLQ), 2, 1)])
    finally:
        await admin.close()
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "COACHBUS_TOPIC_PREFIX": topic_prefix,
        "COACHBUS_PARTITIONS": "2",
    }
    cli = "import sys; from coachbus.cli import main; sys.exit(main())"
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", cli, "topics", "create", "--wait", "10"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "config drift: " + topic_name(settings, Topic.DLQ) in result.stdout
