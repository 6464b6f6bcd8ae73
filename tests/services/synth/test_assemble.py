"""How Synth assembles a streamed reply (services.synth.assemble): the rendering's
first sentence opens the stream; a stream that ended early keeps what the user read
first and the deterministic rendering completes it."""

from __future__ import annotations

import pytest

from services.synth.assemble import complete, opening
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


def test_the_stream_opens_with_the_renderings_first_sentence_only_when_asked() -> None:
    outcome = _outcome()
    first = opening(outcome, "rendered")
    assert first and outcome.text.startswith(first) and first != outcome.text.strip()
    assert opening(outcome, "model") == ""
    # A rendering of one sentence has nothing to continue: no opening.
    alone = outcome.model_copy(update={"text": "Thanks for telling me."})
    assert opening(alone, "rendered") == ""
