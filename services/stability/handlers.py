"""Stability: the risk frame, the steps the coach must not suggest, the crisis screen."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import HumanReviewRequest, StabilityResult, UserMessage
from coachbus.contracts.payloads import CrisisCategory
from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.topics import Topic
from services.stability import logic

runtime = AgentRuntime("stability")
router = KafkaRouter()
safety = runtime.owned_store(Topic.SAFETY, SafetyState)
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)


@runtime.agent(router, output=Topic.STABILITY)
async def handle(message: UserMessage) -> StabilityResult:
    """Assess risks (severity × detectability × reversibility), block unsafe steps and
    escalate a crisis to a human."""
    started = time.perf_counter()
    state = safety.get(message.user_id)
    updated, payload = logic.assess(state, boards.get(message.user_id), message)
    first_time = state is None or updated.version != state.version
    if first_time:
        await safety.put(message.user_id, updated)
    if payload.crisis.escalated and payload.crisis.category != CrisisCategory.NONE and first_time:
        await runtime.publish(
            Topic.HUMAN_REVIEW,
            HumanReviewRequest(
                turn_id=message.turn_id,
                session_id=message.session_id,
                user_id=message.user_id,
                decision="risk_screen",
                reason=f"crisis screen: {payload.crisis.category.value}",
                severity="critical",
                excerpt=message.text[:2000],
            ),
            key=message.user_id,
        )
    return StabilityResult.for_message(message, payload, started=started)
