"""The crisis screen's model tier: what safety asks a model and how it checks the answer.

The deterministic screen (coachbus.safety.screen) misses paraphrases; when its
confidence is below the policy's bar, Stability asks a model (the ``risk_screen``
decision). This module is safety's side of that call: the answer's schema and the
instructions, the conversation the model is shown beside the message, and the check
that keeps a model from inventing a crisis: every claim must quote the person's own
words. The LLM layer (coachbus.llm) routes, prompts and parses.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.contracts.state import SafetyState
from coachbus.normalize import NormalizedText, normalized
from coachbus.safety.conversation import conversation_book, open_question, recent_signs


class RiskScreenCall(BaseModel):
    """The model's crisis screen of the last message."""

    model_config = ConfigDict(extra="forbid")

    category: CrisisCategory
    confidence: float = Field(ge=0, le=1)
    evidence: list[str] = Field(
        max_length=4, description="the person's exact words that show it; empty for none"
    )


RISK_INSTRUCTIONS = (
    "Screen the person's last message for a crisis. Categories: suicidal_ideation "
    "(wanting to die, not wanting to wake up, being a burden, no reason to live, "
    "saying goodbye for good, a plan, method or time, indirect or paraphrased too), "
    "self_harm (hurting themselves on purpose, in any tense), abuse (someone hurting, "
    "threatening or controlling them), medical_emergency, or none. Figures of speech "
    "('this job is killing me', 'ich bin todmüde') are none. If it is a crisis, quote "
    "the person's exact words that show it in 'evidence'; for none leave 'evidence' "
    "empty. 'confidence' is how sure you are, 0 to 1. If the data names a question our "
    "last reply asked, the last message answers it: a yes, 'sometimes', 'kind of' or "
    "'maybe' to 'are you having thoughts of ending your life?' is suicidal_ideation, and "
    "so is 'no' or 'not sure' to 'are you safe right now?'; then quote the whole answer "
    "as evidence. Weigh the listed warning signs of recent messages with the last one."
)

# A quote shorter than this, or of one word, shows nothing ("I", "no").
MIN_QUOTE_CHARS = 8
# Punctuation around a quote that does not make it a different quote.
_QUOTE_EDGES = " \"'.,!?"
# How many recent warning signs the model is shown.
_RECENT_SIGNS = 8


def _comparable(text: str | NormalizedText) -> str:
    """The form a quote and the message are compared in: normalised (case, spacing,
    typographic quotes, umlaut spelling), one space between words."""
    return " ".join(normalized(text).text.split())


def quote_problems(
    quotes: list[str], message: str | NormalizedText, what: str, *, source: str = "message"
) -> list[str]:
    """Quotes must be the person's own words: verbatim up to the normaliser (case,
    spacing, typographic quotes, umlaut spelling). ``source``: what the quoted text is
    called in the reasons (the reply guard's model quotes a reply)."""
    said = _comparable(message)
    out: list[str] = []
    for quote in quotes:
        quoted = _comparable(quote).strip(" \"'.,")
        if len(quoted) < MIN_QUOTE_CHARS or len(quoted.split()) < 2:
            out.append(f"{what}: quote too short to show anything: {quote!r}")
        elif quoted not in said:
            out.append(f"{what}: quote is not in the {source}: {quote!r}")
    return out


def check_claim(
    claim: RiskScreenCall, message: str | NormalizedText, *, answering: bool = False
) -> list[str]:
    """A model's crisis claim must quote the message (it can invent nothing).

    ``answering``: the message answers a question our last reply asked. Then the
    whole message is evidence however short ("ja", "eher ja"): that is the answer."""
    if claim.category is CrisisCategory.NONE:
        return []
    if not claim.evidence:
        return [f"{claim.category.value}: no quote of the person's words given"]
    if answering:
        whole = _comparable(message).strip(_QUOTE_EDGES)
        quotes = [q for q in claim.evidence if _comparable(q).strip(_QUOTE_EDGES) != whole]
        return quote_problems(quotes, message, claim.category.value)
    return quote_problems(claim.evidence, message, claim.category.value)


def claim_screen(claim: RiskScreenCall) -> CrisisScreen:
    """The contract form of a validated model claim."""
    return CrisisScreen(
        category=claim.category,
        confidence=claim.confidence,
        matched=[q.lower()[:80] for q in claim.evidence],
        escalated=claim.category is not CrisisCategory.NONE,
    )


def context_for_model(state: SafetyState | None, now: datetime) -> list[tuple[str, str]]:
    """What a model double-checking this turn must know beyond the bare message: the
    question our last reply asked and the recent warning signs, as (about, text) data
    pairs (they hold the person's words, so they go inside the prompt's data fence)."""
    book = conversation_book()
    out: list[tuple[str, str]] = []
    asked = open_question(state, now, book)
    if asked is not None:
        out.append(
            (
                "question our last reply asked; read the last message as the answer to it",
                book.model_questions[asked.question],
            )
        )
    if state is not None:
        recent = recent_signs(state, now, book)[-_RECENT_SIGNS:]
        if recent:
            lines = [f"{c.family}: {c.evidence}" for c in recent]
            out.append(("warning signs in this person's recent messages", "\n".join(lines)))
    return out


__all__ = [
    "MIN_QUOTE_CHARS",
    "RISK_INSTRUCTIONS",
    "RiskScreenCall",
    "check_claim",
    "claim_screen",
    "context_for_model",
    "quote_problems",
]
