"""Every topic of the pipeline, in one place.

All topics are keyed by ``user_id`` and created with the same partition count, so
the default partitioner puts one user's records at the same partition number in
every topic: the replica that owns a user's input partition also owns that user's
state partition (one writer per partition).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from coachbus.contracts.payloads import AGENTS
from coachbus.settings import CoachbusSettings


class Topic(StrEnum):
    USER_MESSAGES = "user-messages"
    SHADOW = "agent.shadow"
    PERSONA = "agent.persona"
    PLASTICITY = "agent.plasticity"
    STABILITY = "agent.stability"
    COACH = "agent.coach"
    REPLIES = "replies"
    # Coach's at-once reply and its streamed pieces, apart from ``replies`` so that
    # Coach's credentials cannot write a final or a human answer (Kafka ACLs see
    # topics, not a record's kind).
    COACH_REPLIES = "coach-replies"
    DLQ = "dlq"
    HUMAN_REVIEW = "human-review"
    # Compacted state topics: one writer each, keyed so compaction keeps the latest.
    BLACKBOARD = "blackboard"
    PROFILES = "profiles"
    SAFETY = "safety"
    MEMORY = "memory"
    # Erasure: each user's latest erase watermark (compacted, written by the gateway)
    # and the owners' confirmations that they tombstoned the user's state.
    ERASURES = "erasures"
    ERASE_CONFIRMATIONS = "erase-confirmations"
    # Human review (coachbus.contracts.review): reviewers' claims, answers and closes,
    # keyed by the item (the escalated turn), and the audit trail of them.
    REVIEW_ACTIONS = "review-actions"
    REVIEW_AUDIT = "review-audit"


# Each agent's output topic is "agent.<name>", for every name of the one list.
AGENT_TOPICS: dict[str, Topic] = {name: Topic(f"agent.{name}") for name in AGENTS}

COMPACTED: frozenset[Topic] = frozenset(
    {Topic.BLACKBOARD, Topic.PROFILES, Topic.SAFETY, Topic.MEMORY, Topic.ERASURES}
)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]


def topic_name(settings: CoachbusSettings, topic: Topic) -> str:
    return settings.topic(topic.value)


# Why these bounds (docs/reliability.md has the table per topic):
#
# * Event topics (``cleanup.policy=delete``) keep records ``retention_ms`` (7 days by
#   default): long enough to replay a day of turns after an outage, short enough that
#   what a person said is not kept for ever. Kafka deletes whole segments only, so a
#   segment is rolled at least daily (``segment.ms``): without it a quiet topic's
#   records could live retention + 7 days (the default segment.ms).
# * The DLQ carries the original bytes of messages that failed; 3 days is time
#   enough to look at them, and they are never replayed automatically.
# * Compacted state keeps the latest value per user. Compaction only ever touches
#   closed segments and only once they are "dirty" enough, so without bounds an
#   overwritten value (or an erased user's data) could stay for weeks.
#   ``segment.ms`` and ``max.compaction.lag.ms`` (1 day) bound that: a value
#   superseded by a newer one or by a tombstone is compacted away within about a
#   day after its segment closes. ``delete.retention.ms`` (1 day) is how long the
#   tombstone itself stays after that: every reader that rebuilds state (views
#   start from the beginning, owners reload on rebalance) must see the delete; a
#   consumer down for longer than a day rebuilds from the compacted topic anyway.
# * The review audit holds no one's words (coachbus.contracts.review), so it may be
#   kept as long as an operator's duty to account for reviews asks
#   (``review_audit_retention_ms``).
_DAY_MS = 86_400_000


def topic_config(settings: CoachbusSettings, topic: Topic) -> dict[str, str]:
    """The topic-level configuration every deployment gets for ``topic``."""
    if topic in COMPACTED:
        return {
            "cleanup.policy": "compact",
            "max.compaction.lag.ms": str(settings.compaction_lag_ms),
            "delete.retention.ms": str(settings.tombstone_retention_ms),
            "segment.ms": str(settings.compaction_lag_ms),
        }
    retention = {
        Topic.DLQ: settings.dlq_retention_ms,
        Topic.REVIEW_AUDIT: settings.review_audit_retention_ms,
    }.get(topic, settings.retention_ms)
    return {
        "cleanup.policy": "delete",
        "retention.ms": str(retention),
        "segment.ms": str(min(retention, _DAY_MS)),
    }


def all_topic_specs(settings: CoachbusSettings) -> list[TopicSpec]:
    return [
        TopicSpec(
            name=topic_name(settings, topic),
            partitions=settings.partitions,
            replication_factor=settings.replication_factor,
            config=topic_config(settings, topic),
        )
        for topic in Topic
    ]
