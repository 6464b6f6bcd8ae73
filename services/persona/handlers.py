"""Persona: a slowly accumulating Big-Five estimate with per-trait confidence."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import PersonaResult, UserMessage
from coachbus.contracts.state import Blackboard, PersonaProfile
from coachbus.topics import Topic
from services.persona import logic

runtime = AgentRuntime("persona")
router = KafkaRouter()
profiles = runtime.owned_store(Topic.PROFILES, PersonaProfile)
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)


@runtime.agent(router, output=Topic.PERSONA)
async def handle(message: UserMessage) -> PersonaResult:
    """Score BFI-10 items from the message, derive OCEAN with confidence, report
    recurring goals, follow-through and growth opportunities."""
    started = time.perf_counter()
    profile = profiles.get(message.user_id)
    updated, payload = logic.observe(profile, boards.get(message.user_id), message)
    if profile is None or updated.version != profile.version:
        await profiles.put(message.user_id, updated)
    return PersonaResult.for_message(message, payload, started=started)
