"""A message is normalised once per service: Stability's assess, Coach's quick reply
and Synth's synthesis each hand one NormalizedText to every screen they run (crisis,
conversation, risky steps), so none normalises the same text again."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from coachbus import normalize as norm
from coachbus.contracts.state import SafetyState
from evaluation.chain import results_for
from services.coach.logic import quick_reply
from services.stability.logic import assess
from services.synth.logic import synthesize
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

# Reads with every screen of the turn at work: an answer to our open check-in (the
# conversation reads the answer and its explanation), a standing condition (an
# injury), and a step that needs it (training every day).
ANSWER = "No, I meant my knee hurts since Sunday and I still want to train every day."


@pytest.fixture
def normalized_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text ``normalize`` is called on from now, wherever it was imported."""
    calls: list[str] = []
    original: Callable[[str], str] = norm.normalize

    def counting(text: str) -> str:
        calls.append(text)
        return original(text)

    for module in list(sys.modules.values()):
        if getattr(module, "normalize", None) is original:
            monkeypatch.setattr(module, "normalize", counting)
    return calls


def _asked_before() -> SafetyState:
    """A safety state whose last reply asked our check-in."""
    state, payload = assess(None, None, msg("ich will einfach nicht mehr", turn="t1"))
    assert state.open_check_in is not None, payload.crisis
    return state


def test_stability_normalises_the_message_once(normalized_texts: list[str]) -> None:
    before = _asked_before()
    message = msg(ANSWER, turn="t2")
    normalized_texts.clear()
    state, payload = assess(before, None, message)
    assert payload.answered_check_in == "denied"
    assert "injury" in state.conditions
    # The rules' block; the learned reader may add its own reads of the first message
    # (the retrained one reads "ich will einfach nicht mehr" as stopping medication).
    assert "train_through_injury" in [b.step_id for b in payload.blocked_steps]
    assert normalized_texts == [ANSWER]


def test_stability_normalises_a_crisis_message_once(normalized_texts: list[str]) -> None:
    text = "I want to kill myself, I have the pills here."
    message = msg(text)
    normalized_texts.clear()
    _, payload = assess(None, None, message)
    assert payload.crisis.category.value == "suicidal_ideation"
    assert normalized_texts == [text]


def test_coach_normalises_the_message_once(normalized_texts: list[str]) -> None:
    before = _asked_before()
    message = msg("Ich will meine Tabletten absetzen.", turn="t2")
    normalized_texts.clear()
    reply = quick_reply(message, None, before)
    assert reply.text
    assert normalized_texts.count(message.text) == 1


@pytest.mark.parametrize("with_stability", [True, False])
def test_synth_normalises_the_message_once(
    normalized_texts: list[str], with_stability: bool
) -> None:
    text = "I want to quit my job tomorrow and go all in with all my savings."
    message = msg(text)
    _, stability = assess(None, None, message)
    results = results_for(message, stability_p=stability) if with_stability else {}
    missing = [] if with_stability else ["stability"]
    normalized_texts.clear()
    out = synthesize(message, results, missing)
    assert out.sheet.never_say
    assert normalized_texts.count(text) == 1
