"""Synth's completion of a stream that ended early (services.synth.handlers.complete):
what the user read stays first, the deterministic rendering completes it."""

from __future__ import annotations

import pytest

from services.synth.handlers import complete
from services.synth.logic import SynthOutcome, synthesize, validate
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

SHOWN = "Thanks for telling me how the thesis is going. Tidying your notes feels safer."


def _outcome(
    text: str = "I want to finish my thesis, but I keep reorganising my notes.",
) -> SynthOutcome:
    return synthesize(msg(text), {}, ["shadow", "persona", "plasticity", "stability", "coach"])


def test_the_shown_sentences_stay_first_and_the_rendering_completes_them() -> None:
    outcome = _outcome()
    text = complete(SHOWN, outcome)
    assert text.startswith(SHOWN + " ")
    assert validate(text, outcome.sheet) == []
    rest = text[len(SHOWN) + 1 :]
    # The completion is the rendering's own sentences: its ending, never its opening.
    assert outcome.text.endswith(rest)
    assert rest != outcome.text


def test_a_reply_already_at_its_budget_is_completed_with_nothing_more() -> None:
    outcome = _outcome()
    sentence = "You could write one short page of the thesis today."
    full, left = divmod(outcome.sheet.max_words, 10)
    shown = " ".join([sentence] * full + ["Good."] * left)  # exactly the budget
    assert validate(shown, outcome.sheet) == []
    # Not one sentence of the rendering fits after it: the shown text is the reply.
    assert complete(shown, outcome) == shown
