"""Language and du/Sie are decided once per turn, where the message enters, and
travel in the message (UserMessage v2); v1 records are decided on read."""

from __future__ import annotations

import json

import pytest

from coachbus.bus.codec import decode
from coachbus.contracts import UserInputAdapter, UserMessage
from coachbus.contracts.state import Blackboard, PersonaProfile, SafetyState
from services.coach.logic import quick_reply
from services.persona.logic import observe as persona_observe
from services.plasticity.logic import plan
from services.shadow.logic import observe as shadow_observe
from services.stability.logic import assess
from services.synth.logic import synthesize
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def _create(text: str, earlier: str | None = None) -> UserMessage:
    return UserMessage.create(
        user_id="u1",
        session_id="s1",
        text=text,
        deadline_ms=1000,
        max_tokens=100,
        wall_clock_ms=1000,
        earlier=earlier,  # type: ignore[arg-type]
    )


def test_the_gateway_decides_once_and_the_message_carries_it() -> None:
    m = _create("Kannst du mir bitte helfen, ich schaffe es nicht?")
    assert (m.schema_version, m.language, m.address) == (2, "de", "informal")
    assert _create("Okay.", earlier="de").language == "de"
    assert (_create("I want to run more.").language, _create("I want to run.").address) == (
        "en",
        None,
    )


def test_a_v1_record_is_decided_on_read_with_the_same_function() -> None:
    v2 = _create("Ich möchte früher schlafen gehen, können Sie mir helfen?")
    raw = v2.model_dump(mode="json", exclude={"language", "address"})
    raw["schema_version"] = 1
    v1 = decode(json.dumps(raw).encode(), UserInputAdapter, max_bytes=65_536)
    assert isinstance(v1, UserMessage)
    assert (v1.schema_version, v1.language, v1.address) == (1, v2.language, v2.address)


def test_every_agent_uses_the_messages_language_not_its_own_reading() -> None:
    # "Okay." alone reads as English; the gateway knew the conversation was German.
    m = msg("Okay.", earlier="de")
    assert m.language == "de"
    assert quick_reply(m, None, None).language == "de"
    assert plan(None, m).language == "de"
    assert synthesize(m, {}, ["plasticity"]).language == "de"


def test_agents_remember_only_the_users_du_or_sie() -> None:
    m = msg("Kannst du mir helfen, ich will mehr laufen?")
    board, _ = shadow_observe(None, m)
    profile, _ = persona_observe(None, board, m)
    safety, _ = assess(None, board, m)
    assert board.formality == profile.formality == "informal"
    assert "language" not in Blackboard.model_fields
    assert "language" not in PersonaProfile.model_fields
    assert not {"language", "formality"} & SafetyState.model_fields.keys()
    assert safety.turn_count == 1
    # The remembered du carries to a German message that shows none.
    later = msg("Ich möchte früher schlafen gehen.", turn="t2")
    assert later.address is None
    assert plan(profile, later).preferences.formality == "informal"
    assert quick_reply(later, board, safety).language == "de"


def test_state_written_before_the_change_still_loads() -> None:
    old = {"user_id": "u1", "language": "de", "formality": "formal"}
    assert Blackboard.model_validate(old).formality == "formal"
    assert PersonaProfile.model_validate(old).formality == "formal"
    assert SafetyState.model_validate(old).user_id == "u1"
