"""The chain of agents: user messages through Coach, Shadow, Persona, Plasticity,
Stability and Synth's pure functions, in process, with no broker and no LLM.

State is chained turn by turn as the services chain it through their compacted
topics: Coach answers from last turn's board and safety state (it replies before
this turn's results exist); Shadow, Persona, Plasticity and Stability read the board
as Shadow left it after the previous turn (Persona may lag one turn in production;
here it always reads the previous turn's); Plasticity reads Persona's last stored
profile; Synth joins all five results. The scorers, the scripted-conversation tests
and the fingerprint (bench/fingerprint.py) all run this one chain, so what they
measure is the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Step:
    """One message through the chain: each agent's answer, Synth's outcome, and the
    state records as they stand after the turn."""

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
    """The agents' results as Synth receives them from the bus (deterministic tier),
    for the payloads given; a missing one is an agent that did not answer."""
    common: dict[str, Any] = {
        "turn_id": msg.turn_id,
        "session_id": msg.session_id,
        "user_id": msg.user_id,
        "tier": "deterministic",
        "latency_ms": 0.1,
    }
    out: dict[str, AgentResult] = {}
    if shadow_p is not None:
        out["shadow"] = ShadowResult(payload=shadow_p, **common)
    if persona_p is not None:
        out["persona"] = PersonaResult(payload=persona_p, **common)
    if plasticity_p is not None:
        out["plasticity"] = PlasticityResult(payload=plasticity_p, **common)
    if stability_p is not None:
        out["stability"] = StabilityResult(payload=stability_p, **common)
    if coach_p is not None:
        out["coach"] = CoachResult(payload=coach_p, **common)
    return out


@dataclass(slots=True)
class Chain:
    """One user's state records, carried from turn to turn (None: nothing stored yet)."""

    board: Blackboard | None = None
    profile: PersonaProfile | None = None
    safety: SafetyState | None = None

    def turn(self, msg: UserMessage) -> Step:
        board, profile = self.board, self.profile
        c = coach.quick_reply(msg, board, self.safety)
        self.board, sp = shadow.observe(board, msg)
        self.profile, pp = persona.observe(profile, board, msg)
        pl = plasticity.plan(profile, msg, board)
        self.safety, st = stability.assess(self.safety, board, msg)
        results = results_for(
            msg, shadow_p=sp, persona_p=pp, plasticity_p=pl, stability_p=st, coach_p=c
        )
        final = synth.synthesize(msg, results, [])
        return Step(msg, c, sp, pp, pl, st, final, self.board, self.profile, self.safety)


def run(messages: Iterable[UserMessage]) -> list[Step]:
    """One user's messages through the chain, from empty state."""
    chain = Chain()
    return [chain.turn(m) for m in messages]


__all__ = ["Chain", "Step", "results_for", "run"]
