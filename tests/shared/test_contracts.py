"""State records and payloads survive the wire (JSON) unchanged."""

from __future__ import annotations

import pytest

from coachbus.contracts.events import AgentResultAdapter
from coachbus.contracts.payloads import DecisionSheet, Risk
from coachbus.contracts.state import Blackboard, PersonaProfile, SafetyState
from evaluation.chain import results_for
from tests.fixtures.conversation import USERS
from tests.fixtures.replay import replay

pytestmark = pytest.mark.unit


def test_defaults_allow_bare_records() -> None:
    for cls in (Blackboard, PersonaProfile, SafetyState):
        rec = cls(user_id="u")
        assert rec.version == 0 and not rec.has_applied("t")
        rec.mark_applied("t")
        assert rec.has_applied("t") and rec.version == 1


def test_risk_priority_is_serialised_and_accepted_back() -> None:
    risk = Risk(risk_id="r", description="d", severity=5, detectability=3, reversibility=5)
    data = risk.model_dump()
    assert data["priority"] == 75
    assert Risk.model_validate(data) == risk


@pytest.mark.parametrize("user", USERS)
def test_everything_round_trips_through_json(user: str) -> None:
    for s in replay(user):
        for rec, cls in (
            (s.board, Blackboard),
            (s.profile, PersonaProfile),
            (s.safety, SafetyState),
        ):
            assert cls.model_validate_json(rec.model_dump_json()) == rec
        results = results_for(
            s.msg,
            shadow_p=s.shadow,
            persona_p=s.persona,
            plasticity_p=s.plasticity,
            stability_p=s.stability,
            coach_p=s.coach,
        )
        for r in results.values():
            assert AgentResultAdapter.validate_json(AgentResultAdapter.dump_json(r)) == r
        assert DecisionSheet.model_validate_json(s.final.sheet.model_dump_json()) == s.final.sheet
