"""Shadow: keeps each user's behaviour patterns on the blackboard (its only writer)."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import ShadowResult, UserMessage
from coachbus.contracts.state import Blackboard
from coachbus.topics import Topic
from services.shadow import logic

runtime = AgentRuntime("shadow")
router = KafkaRouter()
boards = runtime.owned_store(Topic.BLACKBOARD, Blackboard)


@runtime.agent(router, output=Topic.SHADOW)
async def handle(message: UserMessage) -> ShadowResult:
    """Update the user's blackboard from the new message; report goals, priorities,
    follow-through predictions and patterns."""
    started = time.perf_counter()
    board = boards.get(message.user_id)
    updated, payload = logic.observe(board, message)
    # A redelivered turn leaves the board as it was: nothing to write again.
    if board is None or updated.version != board.version:
        await boards.put(message.user_id, updated)
    return ShadowResult.for_message(message, payload, started=started)
