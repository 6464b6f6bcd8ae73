"""Every topic of the pipeline, in one place.

All topics are keyed by ``user_id`` and created with the same partition count, so
the default partitioner puts one user's records at the same partition number in
every topic: the replica that owns a user's input partition also owns that user's
state partition (one writer per partition).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from coachbus.settings import CoachbusSettings


class Topic(StrEnum):
    USER_MESSAGES = "user-messages"
    SHADOW = "agent.shadow"
    PERSONA = "agent.persona"
    PLASTICITY = "agent.plasticity"
    STABILITY = "agent.stability"
    COACH = "agent.coach"
    REPLIES = "replies"
    DLQ = "dlq"
    HUMAN_REVIEW = "human-review"
    # Compacted state topics: one writer each, keyed so compaction keeps the latest.
    BLACKBOARD = "blackboard"
    PROFILES = "profiles"
    SAFETY = "safety"
    MEMORY = "memory"


AGENT_TOPICS: dict[str, Topic] = {
    "shadow": Topic.SHADOW,
    "persona": Topic.PERSONA,
    "plasticity": Topic.PLASTICITY,
    "stability": Topic.STABILITY,
    "coach": Topic.COACH,
}

COMPACTED: frozenset[Topic] = frozenset(
    {Topic.BLACKBOARD, Topic.PROFILES, Topic.SAFETY, Topic.MEMORY}
)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]


def topic_name(settings: CoachbusSettings, topic: Topic) -> str:
    return settings.topic(topic.value)


def all_topic_specs(settings: CoachbusSettings) -> list[TopicSpec]:
    specs = []
    for topic in Topic:
        config = {"cleanup.policy": "compact"} if topic in COMPACTED else {}
        specs.append(
            TopicSpec(
                name=topic_name(settings, topic),
                partitions=settings.partitions,
                replication_factor=settings.replication_factor,
                config=config,
            )
        )
    return specs
