"""Replays the scripted conversation through the pure agent functions.

State is chained turn by turn exactly as the services chain it through their
compacted topics: Coach sees last turn's board and safety state, Persona sees the
board as Shadow left it after the previous turn (it may lag one turn in
production; here it reads the board of the previous turn to match), Plasticity
sees Persona's last stored profile, and Synth joins all five results.
"""

from __future__ import annotations

from dataclasses import dataclass

from coachbus.contracts.events import (
    AgentResult,
    CoachResult,
    PersonaResult,
    PlasticityResult,
    ShadowResult,
    StabilityResult,
    UserMessage,
)
from coachbus.contracts.payloads import (
    CoachPayload,
    PersonaPayload,
    PlasticityPayload,
    ShadowPayload,
    StabilityPayload,
)
from coachbus.contracts.state import Blackboard, PersonaProfile, SafetyState
from services.coach import logic as coach
from services.persona import logic as persona
from services.plasticity import logic as plasticity
from services.shadow import logic as shadow
from services.stability import logic as stability
from services.synth import logic as synth
from tests.fixtures.conversation import ScriptedTurn, as_message, turns_for


@dataclass
class Step:
    turn: ScriptedTurn
    msg: UserMessage
    coach: CoachPayload
    shadow: ShadowPayload
    persona: PersonaPayload
    plasticity: PlasticityPayload
    stability: StabilityPayload
    final: synth.SynthOutcome
    board: Blackboard
    profile: PersonaProfile
    safety: SafetyState


def results_for(
    msg: UserMessage,
    *,
    shadow_p: ShadowPayload | None = None,
    persona_p: PersonaPayload | None = None,
    plasticity_p: PlasticityPayload | None = None,
    stability_p: StabilityPayload | None = None,
    coach_p: CoachPayload | None = None,
) -> dict[str, AgentResult]:
    common = {
        "turn_id": msg.turn_id,
        "session_id": msg.session_id,
        "user_id": msg.user_id,
        "tier": "deterministic",
        "latency_ms": 0.1,
    }
    out: dict[str, AgentResult] = {}
    if shadow_p is not None:
        out["shadow"] = ShadowResult(payload=shadow_p, **common)  # type: ignore[arg-type]
    if persona_p is not None:
        out["persona"] = PersonaResult(payload=persona_p, **common)  # type: ignore[arg-type]
    if plasticity_p is not None:
        out["plasticity"] = PlasticityResult(payload=plasticity_p, **common)  # type: ignore[arg-type]
    if stability_p is not None:
        out["stability"] = StabilityResult(payload=stability_p, **common)  # type: ignore[arg-type]
    if coach_p is not None:
        out["coach"] = CoachResult(payload=coach_p, **common)  # type: ignore[arg-type]
    return out


def replay(user_id: str) -> list[Step]:
    board: Blackboard | None = None
    profile: PersonaProfile | None = None
    safety: SafetyState | None = None
    steps: list[Step] = []
    for turn in turns_for(user_id):
        msg = as_message(turn)
        prev_board, prev_profile = board, profile
        c = coach.quick_reply(msg, prev_board, safety)
        board, sp = shadow.observe(prev_board, msg)
        profile, pp = persona.observe(prev_profile, prev_board, msg)
        pl = plasticity.plan(prev_profile, msg)
        safety, st = stability.assess(safety, prev_board, msg)
        results = results_for(
            msg, shadow_p=sp, persona_p=pp, plasticity_p=pl, stability_p=st, coach_p=c
        )
        final = synth.synthesize(msg, results, [])
        steps.append(Step(turn, msg, c, sp, pp, pl, st, final, board, profile, safety))
    return steps
