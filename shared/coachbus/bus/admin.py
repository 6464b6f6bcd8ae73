"""Topic administration: idempotent creation with a configured partition count, and
the topics' retention/compaction settings checked (and on request fixed) on an
existing cluster."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import IncompatibleBrokerVersion, KafkaConnectionError, KafkaError

from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import TopicSpec, all_topic_specs

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = 36
# DescribeConfigs' config_source for a value set on the topic itself (KIP-226).
DYNAMIC_TOPIC_CONFIG = 1


@dataclass(frozen=True, slots=True)
class ConfigDrift:
    """One topic setting that differs from what coachbus.topics asks for."""

    topic: str
    key: str
    expected: str
    actual: str | None  # None: the broker reports no value for it at all

    def __str__(self) -> str:
        return f"{self.topic}: {self.key}={self.actual or '(unset)'}, expected {self.expected}"


class ConfigFixUnsupported(RuntimeError):
    """The broker cannot alter topic configs (the embedded Tansu cannot)."""


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


async def describe_topic_configs(
    admin: AIOKafkaAdminClient, names: list[str]
) -> dict[str, dict[str, tuple[str | None, int]]]:
    """Every topic's configuration as the broker reports it: key -> (value, source)."""
    if not names:
        return {}
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    )
    configs: dict[str, dict[str, tuple[str | None, int]]] = {}
    for response in responses:
        for error_code, error_message, _type, name, entries in response.resources:
            if error_code:
                raise RuntimeError(f"could not describe configs of {name}: {error_message}")
            # Entries are (name, value, read_only, source, sensitive, synonyms) from v1
            # on; v0 has is_default where source is: only the value is relied on there.
            configs[name] = {
                entry[0]: (entry[1], int(entry[3]) if len(entry) > 5 else 0) for entry in entries
            }
    return configs


async def config_drift(
    settings: CoachbusSettings, kafka: KafkaSettings, specs: list[TopicSpec] | None = None
) -> list[ConfigDrift]:
    """Settings of existing topics that differ from their specs (missing topics are
    ensure_topics' business, not drift)."""
    specs = specs if specs is not None else all_topic_specs(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.servers, **kafka.client_kwargs())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        present = [s for s in specs if s.name in existing]
        actual = await describe_topic_configs(admin, [s.name for s in present])
    finally:
        await admin.close()
    drift = []
    for spec in present:
        have = actual.get(spec.name, {})
        for key, expected in sorted(spec.config.items()):
            value = have.get(key, (None, 0))[0]
            if value != expected:
                drift.append(ConfigDrift(spec.name, key, expected, value))
    return drift


async def fix_config_drift(
    settings: CoachbusSettings,
    kafka: KafkaSettings,
    drift: list[ConfigDrift],
    specs: list[TopicSpec] | None = None,
) -> None:
    """Set the drifted topics' configs to their specs.

    AlterConfigs replaces *all* of a topic's own settings, so each request carries the
    settings set on the topic today (source DYNAMIC_TOPIC_CONFIG) with ours on top: an
    operator's unrelated override (say ``max.message.bytes``) survives the fix."""
    if not drift:
        return
    specs = specs if specs is not None else all_topic_specs(settings)
    wanted = {s.name: s.config for s in specs}
    names = sorted({d.topic for d in drift})
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka.servers, **kafka.client_kwargs())
    await admin.start()
    try:
        current = await describe_topic_configs(admin, names)
        resources = []
        for name in names:
            own = {
                key: value
                for key, (value, source) in current.get(name, {}).items()
                if source == DYNAMIC_TOPIC_CONFIG and value is not None
            }
            resources.append(
                ConfigResource(ConfigResourceType.TOPIC, name, configs={**own, **wanted[name]})
            )
        try:
            responses = await admin.alter_configs(resources)
        except IncompatibleBrokerVersion as exc:
            raise ConfigFixUnsupported(
                "this broker does not implement AlterConfigs (the embedded Tansu does "
                "not): recreate the topics to apply the new settings"
            ) from exc
        for response in responses:
            for error_code, error_message, _type, name in response.resources:
                if error_code:
                    raise RuntimeError(f"could not alter configs of {name}: {error_message}")
        log.info("altered topic configs: %s", ", ".join(names))
    finally:
        await admin.close()
