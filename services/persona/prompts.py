"""Persona's LLM tier: BFI-10 items read from the message, each with evidence.

The model does not guess traits: it says which of the ten BFI-10 statements the
message shows the person agreeing or disagreeing with, quoting their words. Those
readings go through the same accounting as the cue phrases (``ocean.apply_cues``),
so a number in the profile is always traceable to words the person said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import PersonaPayload
from coachbus.contracts.state import PersonaProfile
from coachbus.llm import Message, PromptBuilder, PromptContext
from coachbus.ocean import ItemCue

AGENT = "persona"
MIN_QUOTE_CHARS = 8

ITEMS = {
    1: "is reserved",
    2: "is generally trusting",
    3: "tends to be lazy",
    4: "is relaxed, handles stress well",
    5: "has few artistic interests",
    6: "is outgoing, sociable",
    7: "tends to find fault with others",
    8: "does a thorough job",
    9: "gets nervous easily",
    10: "has an active imagination",
}


class ItemReading(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item: int = Field(ge=1, le=10)
    direction: Literal["agree", "disagree"]
    evidence: str = Field(description="the person's exact words that show it")


class ItemsCall(BaseModel):
    """BFI-10 statements the last message gives evidence on."""

    model_config = ConfigDict(extra="forbid")

    items: list[ItemReading] = Field(max_length=10)


@dataclass(slots=True)
class PersonaDecision:
    profile: PersonaProfile
    payload: PersonaPayload
    readings: list[ItemReading] = field(default_factory=list)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower().strip(" \"'„“”")


def check(decision: PersonaDecision, message: str) -> list[str]:
    out: list[str] = []
    said = _norm(message)
    seen: set[int] = set()
    for r in decision.readings:
        q = _norm(r.evidence)
        if r.item in seen:
            out.append(f"item {r.item} read twice")
        seen.add(r.item)
        if len(q) < MIN_QUOTE_CHARS:
            out.append(f"item {r.item}: evidence too short: {r.evidence!r}")
        elif q not in said:
            out.append(f"item {r.item}: evidence is not in the message: {r.evidence!r}")
    return out


def merge(regex: list[ItemCue], readings: list[ItemReading]) -> list[ItemCue]:
    """One cue per item: the model's reading where it gave one (it reads negation and
    context better), the cue phrase's elsewhere (the model can miss one too)."""
    by_item = {c.item: c for c in regex}
    for r in readings:
        by_item[r.item] = ItemCue(r.item, 1 if r.direction == "agree" else -1, _norm(r.evidence))
    return [by_item[i] for i in sorted(by_item)]


def instructions(errors: list[str]) -> str:
    statements = "\n".join(f"{i}. ... {s}" for i, s in ITEMS.items())
    text = (
        "Read the person's last message as self-description for the BFI-10 "
        '("I see myself as someone who ..."):\n'
        f"{statements}\n"
        "List only statements the message gives real evidence on, whether the person "
        "would agree or disagree, and their exact words as 'evidence'. Do not guess "
        "from the topic alone; an empty list is a good answer for most messages."
    )
    if errors:
        # The reasons quote the model's evidence, i.e. the person's words: they follow
        # as fenced data in a user message (PromptBuilder), not in these instructions.
        text += "\n\nYour previous answer was rejected; the reasons follow."
    return text


def messages(builder: PromptBuilder, ctx: PromptContext, errors: list[str]) -> list[Message]:
    return builder.build(
        ctx, AGENT, instructions(errors), rejected=errors[:6], kind="ocean_update"
    ).messages
