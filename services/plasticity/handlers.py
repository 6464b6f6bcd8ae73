"""Plasticity: OCEAN → communication preferences → a coaching strategy."""

from __future__ import annotations

import time

from faststream.kafka import KafkaRouter

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import PlasticityResult, UserMessage
from coachbus.contracts.state import Blackboard, PersonaProfile
from coachbus.topics import Topic
from services.plasticity import logic

runtime = AgentRuntime("plasticity")
router = KafkaRouter()
# Persona writes profiles; Plasticity reads the latest one (it may lag one turn,
# which is fine for a slowly moving prior and keeps the fan-out parallel).
profiles = runtime.table_view(Topic.PROFILES, PersonaProfile)
# Shadow writes the primary pattern on the blackboard: read it there, first hand,
# not through Persona's copy (a turn or two later), as Persona and Coach do.
boards = runtime.table_view(Topic.BLACKBOARD, Blackboard)


@runtime.agent(router, output=Topic.PLASTICITY)
async def handle(message: UserMessage) -> PlasticityResult:
    """Map the user's personality estimate and message to how to coach them."""
    started = time.perf_counter()
    payload = logic.plan(profiles.get(message.user_id), message, boards.get(message.user_id))
    return PlasticityResult.for_message(message, payload, started=started)
