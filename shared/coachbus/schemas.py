"""Which contract each topic carries, as JSON Schema.

The models in ``coachbus.contracts`` (and the memory record) are the contracts;
this maps every topic to its model, so the generated AsyncAPI documents show each
channel's real payload and any Kafka client can read what a topic holds.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from coachbus.contracts import (
    CoachResult,
    DeadLetter,
    EraseConfirmation,
    EraseWatermark,
    HumanReviewRequest,
    PersonaResult,
    PlasticityResult,
    Reply,
    ReviewAuditEvent,
    ShadowResult,
    StabilityResult,
)
from coachbus.contracts.events import UserInput
from coachbus.contracts.review import ReviewAction
from coachbus.contracts.state import Blackboard, PersonaProfile, SafetyState
from coachbus.memory import MemoryRecord
from coachbus.topics import Topic

CONTRACTS: dict[Topic, Any] = {
    Topic.USER_MESSAGES: UserInput,
    Topic.SHADOW: ShadowResult,
    Topic.PERSONA: PersonaResult,
    Topic.PLASTICITY: PlasticityResult,
    Topic.STABILITY: StabilityResult,
    Topic.COACH: CoachResult,
    Topic.REPLIES: Reply,
    Topic.COACH_REPLIES: Reply,
    Topic.DLQ: DeadLetter,
    Topic.HUMAN_REVIEW: HumanReviewRequest,
    Topic.BLACKBOARD: Blackboard,
    Topic.PROFILES: PersonaProfile,
    Topic.SAFETY: SafetyState,
    Topic.MEMORY: MemoryRecord,
    Topic.ERASURES: EraseWatermark,
    Topic.ERASE_CONFIRMATIONS: EraseConfirmation,
    Topic.REVIEW_ACTIONS: ReviewAction,
    Topic.REVIEW_AUDIT: ReviewAuditEvent,
}

# Where AsyncAPI keeps reusable schemas: a payload's references point there.
REF_TEMPLATE = "#/components/schemas/{model}"


def topic_schema(topic: Topic) -> tuple[dict[str, Any], dict[str, Any]]:
    """The topic's payload schema (referring to ``REF_TEMPLATE``) and the
    definitions it refers to, for validating records as they are on the wire."""
    schema = TypeAdapter(CONTRACTS[topic]).json_schema(
        ref_template=REF_TEMPLATE, mode="serialization"
    )
    definitions = schema.pop("$defs", {})
    return schema, definitions
