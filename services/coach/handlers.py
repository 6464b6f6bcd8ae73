"""Coach: the immediate reply. It never waits for this turn's other agents."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import CoachResult, Reply, UserMessage, utcnow
from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.metrics import COACH_FIRST_REPLY
from coachbus.topics import Topic
from services.coach import logic

runtime = AgentRuntime("coach")
router = KafkaRouter()
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)
safety = runtime.table_view(Topic.SAFETY, SafetyState)


@runtime.agent(router, output=Topic.COACH)
async def handle(message: UserMessage) -> CoachResult:
    """Answer at once from what is already known (blackboard, last blocked steps,
    crisis screen of the new message)."""
    started = time.perf_counter()
    payload = logic.quick_reply(message, boards.get(message.user_id), safety.get(message.user_id))
    reply = Reply(
        turn_id=message.turn_id,
        session_id=message.session_id,
        user_id=message.user_id,
        kind="coach",
        text=payload.text,
        language=payload.language,
    )
    await runtime.publish(Topic.REPLIES, reply, key=message.user_id)
    COACH_FIRST_REPLY.labels("deterministic").observe(
        (utcnow() - message.created_at).total_seconds()
    )
    return CoachResult.for_message(message, payload, started=started)
