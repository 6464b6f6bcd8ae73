"""Persona: a slowly accumulating Big-Five estimate with per-trait confidence."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus import ocean
from coachbus.bus.service import AgentRuntime
from coachbus.contracts import PersonaResult, UserMessage
from coachbus.contracts.state import Blackboard, PersonaProfile
from coachbus.llm import LLMTier, Message
from coachbus.memory import MemoryRecord, context_for
from coachbus.topics import Topic
from services.persona import logic, prompts
from services.persona.prompts import PersonaDecision

runtime = AgentRuntime("persona")
router = KafkaRouter()
profiles = runtime.owned_store(Topic.PROFILES, PersonaProfile)
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)
memory = runtime.table_view(Topic.MEMORY, MemoryRecord)


@runtime.agent(router, output=Topic.PERSONA)
async def handle(message: UserMessage) -> PersonaResult:
    """Score BFI-10 items from the message, derive OCEAN with confidence, report
    recurring goals, follow-through and growth opportunities."""
    started = time.perf_counter()
    profile = profiles.get(message.user_id)
    board = boards.get(message.user_id)
    updated, payload = logic.observe(profile, board, message)
    if profile is not None and updated.version == profile.version:
        # Already folded in (a redelivery): the evidence must not be counted twice.
        return PersonaResult.for_message(message, payload, started=started)

    def build(tier: LLMTier, errors: list[str]) -> list[Message]:
        ctx = context_for(memory.get(message.user_id), message)
        return prompts.messages(runtime.prompt_builder(), ctx, errors)

    def convert(parsed: prompts.ItemsCall) -> PersonaDecision:
        cues = prompts.merge(ocean.score_items(message.text), list(parsed.items))
        # From the profile as it was: the regex cues must not be applied as well.
        profile_, payload_ = logic.observe(profile, board, message, cues=cues)
        return PersonaDecision(profile_, payload_, list(parsed.items))

    outcome = await runtime.tiers.decide(
        kind="ocean_update",
        agent="persona",
        deterministic=lambda: (PersonaDecision(updated, payload), payload.confidence),
        build_messages=build,
        response_model=prompts.ItemsCall,
        budget=message.budget,
        validate=lambda d: prompts.check(d, message.text),
        convert=convert,
    )
    await profiles.put(message.user_id, outcome.value.profile)
    return PersonaResult.for_message(
        message,
        outcome.value.payload,
        started=started,
        tier=outcome.tier,
        usage=outcome.usage,
        fallback_reason=outcome.fallback_reason,
    )
