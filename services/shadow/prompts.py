"""Shadow's LLM tier: pattern classification with verbatim evidence.

The model may add patterns from the fixed taxonomy (docs/patterns.md) that the
cue phrases missed, each with the user's own words as evidence. Quotes that are
not in the message are rejected: the blackboard is reflected back to the user,
so an invented quote would put words in their mouth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import PatternClass, ShadowPayload
from coachbus.contracts.state import QUOTE_CHARS, Blackboard
from coachbus.llm import Message, PromptBuilder, PromptContext

AGENT = "shadow"
MIN_QUOTE_CHARS = 12


class PatternClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: PatternClass
    evidence: str = Field(description="the person's exact words that show the pattern")


class PatternCall(BaseModel):
    """Patterns the last message shows."""

    model_config = ConfigDict(extra="forbid")

    patterns: list[PatternClaim] = Field(max_length=4)


@dataclass(slots=True)
class ShadowDecision:
    board: Blackboard
    payload: ShadowPayload
    claims: list[PatternClaim] = field(default_factory=list)


def _norm(text: str) -> str:
    return " ".join(text.split())


def verbatim(quote: str, message: str) -> str | None:
    """The quote as it occurs in the message (spacing normalised), or None."""
    q = _norm(quote).strip(" \"'„“”")
    said = _norm(message)
    at = said.lower().find(q.lower())
    return said[at : at + len(q)] if q and at >= 0 else None


def check(decision: ShadowDecision, message: str) -> list[str]:
    out: list[str] = []
    for claim in decision.claims:
        q = _norm(claim.evidence)
        if len(q) < MIN_QUOTE_CHARS or len(q.split()) < 3:
            out.append(f"{claim.pattern.value}: evidence too short: {claim.evidence!r}")
        elif len(q) > QUOTE_CHARS:
            out.append(f"{claim.pattern.value}: evidence longer than {QUOTE_CHARS} characters")
        elif verbatim(q, message) is None:
            out.append(f"{claim.pattern.value}: evidence is not in the message: {claim.evidence!r}")
    return out


def instructions(errors: list[str]) -> str:
    # The classes and their definitions are in the briefing's reference (shared prefix).
    text = (
        "Classify the behaviour patterns the person's last message shows, using only "
        "the classes of the reference. For each pattern give the person's exact words "
        "from the last message as 'evidence' (a short verbatim excerpt, at most one "
        "sentence). Do not quote earlier messages. An empty list when no pattern shows."
    )
    if errors:
        # The reasons quote the model's evidence, i.e. the person's words: they follow
        # as fenced data in a user message (PromptBuilder), not in these instructions.
        text += "\n\nYour previous answer was rejected; the reasons follow."
    return text


def messages(builder: PromptBuilder, ctx: PromptContext, errors: list[str]) -> list[Message]:
    return builder.build(
        ctx, AGENT, instructions(errors), rejected=errors[:6], kind="pattern_classification"
    ).messages
