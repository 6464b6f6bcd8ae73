"""How a streamed final reply is put together with the deterministic rendering: the
sentence the stream opens with, and the completion of a stream that ended early.

Pure functions of the synthesis (no runtime, nothing published): the handlers
call them while the model writes, the tests call them directly.
"""

from __future__ import annotations

import re
from typing import Literal

from coachbus.safety.helplines import SHIPPED, Helplines
from services.synth.logic import SynthOutcome, validate

# A sentence end in the deterministic rendering (its sentences are hand-written:
# a sentence ends at its mark followed by a space).
_RENDERED_SENTENCE = re.compile(r"(?<=[.!?…])\s+")


def opening(outcome: SynthOutcome, style: Literal["rendered", "model"]) -> str:
    """The sentence a streamed synthesis opens with when ``style`` (the setting
    ``COACHBUS_SYNTH_OPENING``) is "rendered": the deterministic rendering's first,
    its acknowledgement, when more follows it.

    It is shown the moment the model is asked, so the user reads the synthesis from
    before the model's first token; the model continues it. It is code-written
    from fixed phrases and checked with the whole rendering (``logic.synthesize``),
    and when the model fails, the rendering that completes the reply begins with
    it (:func:`complete`), so what was shown never has to be taken back."""
    if style != "rendered":
        return ""
    first, *rest = _RENDERED_SENTENCE.split(outcome.text.strip(), maxsplit=1)
    return " ".join(first.split()) if rest and rest[0].strip() else ""


def complete(shown: str, outcome: SynthOutcome, *, helplines: Helplines = SHIPPED) -> str:
    """The reply when a stream ended early: what the user has read, completed from
    the deterministic rendering.

    The rendering's opening (its acknowledgement) is skipped first, then more of
    its beginning until the whole fits the sheet's word budget, so the reply keeps
    the rendering's step and closing question; the first candidate the validator
    accepts is the reply. What was shown cannot be taken back, so when none is
    accepted the one with the fewest problems goes out (the shown sentences were
    each checked, and the rendering's are checked when it is built).
    """
    rendered = [s for s in _RENDERED_SENTENCE.split(outcome.text) if s.strip()]
    tails = [rendered[k:] for k in range(1, len(rendered))] + [[], rendered]
    best: tuple[int, str] | None = None
    for tail in tails:
        text = " ".join([shown, *tail])
        problems = validate(text, outcome.sheet, helplines=helplines)
        if not problems:
            return text
        if best is None or len(problems) < best[0]:
            best = (len(problems), text)
    assert best is not None
    return best[1]
