"""Shadow: keeps each user's behaviour patterns on the blackboard (its only writer)."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import ShadowResult, UserMessage
from coachbus.contracts.state import Blackboard
from coachbus.llm import LLMTier, Message
from coachbus.memory import MemoryRecord, context_for
from coachbus.topics import Topic
from services.shadow import logic, prompts
from services.shadow.prompts import ShadowDecision

runtime = AgentRuntime("shadow")
router = KafkaRouter()
boards = runtime.owned_store(Topic.BLACKBOARD, Blackboard)
memory = runtime.table_view(Topic.MEMORY, MemoryRecord)


@runtime.agent(router, output=Topic.SHADOW)
async def handle(message: UserMessage) -> ShadowResult:
    """Update the user's blackboard from the new message; report goals, priorities,
    follow-through predictions and patterns."""
    started = time.perf_counter()
    board = boards.get(message.user_id)
    updated, payload = logic.observe(board, message)
    if board is not None and updated.version == board.version:
        # A redelivered turn leaves the board as it was: nothing to decide or write again.
        return ShadowResult.for_message(message, payload, started=started)

    def deterministic() -> tuple[ShadowDecision, float]:
        # A crisis message is never pattern material: no model reads it for patterns.
        sure = logic.is_crisis_message(message)
        return ShadowDecision(updated, payload), (
            1.0 if sure else logic.classification_confidence(updated)
        )

    def build(tier: LLMTier, errors: list[str]) -> list[Message]:
        ctx = context_for(memory.get(message.user_id), message)
        return prompts.messages(runtime.prompt_builder(), ctx, errors)

    def convert(parsed: prompts.PatternCall) -> ShadowDecision:
        claims = list(parsed.patterns)
        found = [
            (c.pattern, q) for c in claims if (q := prompts.verbatim(c.evidence, message.text))
        ]
        board_, payload_ = logic.refine(updated, message, found)
        return ShadowDecision(board_, payload_, claims)

    outcome = await runtime.tiers.decide(
        kind="pattern_classification",
        agent="shadow",
        deterministic=deterministic,
        build_messages=build,
        response_model=prompts.PatternCall,
        budget=message.budget,
        validate=lambda d: prompts.check(d, message.text),
        convert=convert,
    )
    await boards.put(message.user_id, outcome.value.board)
    return ShadowResult.for_message(
        message,
        outcome.value.payload,
        started=started,
        tier=outcome.tier,
        usage=outcome.usage,
        fallback_reason=outcome.fallback_reason,
    )
