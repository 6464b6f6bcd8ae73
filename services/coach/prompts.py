"""Coach's LLM tier: the instructions, the answer model and its semantic checks.

The Coach streams plain text (the user reads it as it is written), so the answer
model only wraps the finished text for the router; the checks below run on the
growing text while it streams (``partial=True``) and on the whole reply.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import CoachPayload
from coachbus.llm import Message, PromptBuilder, PromptContext

# Re-exported: the stream shows nothing before the language can be judged.
from coachbus.replycheck import LANGUAGE_AFTER_WORDS as LANGUAGE_AFTER_WORDS
from coachbus.replycheck import check_reply
from coachbus.safety.steps import CATALOGUE
from coachbus.text import Register

AGENT = "coach"
MIN_WORDS = 6
MAX_WORDS = 90


class CoachDraft(BaseModel):
    """The streamed reply, once complete."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1200)


_LANG = {"en": "English", "de": "German"}

INSTRUCTIONS = (
    "Reply to the person's last message as their coach, right now, in two or three "
    "short sentences: acknowledge one specific thing they said, then ask one focused "
    "question or offer one small next step. Write in {language}{register}. Plain "
    "prose only: no lists, no headings, no labels, no emojis, never mention any "
    "system, agent or analysis.{avoid}\nA plain draft you may improve is in the data "
    "block about 'draft'."
)
# The draft echoes the person's words (their goal, its domain): it is data, fenced in
# a user message (``messages``), never part of these system-role instructions.
DRAFT = "draft"


def instructions(payload: CoachPayload, register: Register, errors: list[str]) -> str:
    reg = ""
    if payload.language == "de":
        reg = ", addressing them as 'Sie'" if register == "formal" else ", addressing them as 'du'"
    steps = [CATALOGUE[s] for s in payload.avoided_steps if s in CATALOGUE]
    avoid = ""
    if steps:
        avoid = (
            " Never suggest or mention: "
            + "; ".join(s.step for s in steps)
            + ". Steer toward: "
            + "; ".join(s.safer.get(payload.language, register) for s in steps)
            + "."
        )
    text = INSTRUCTIONS.format(language=_LANG[payload.language], register=reg, avoid=avoid)
    if errors:
        # The reasons quote the rejected reply: they follow as data (PromptBuilder).
        text += "\n\nYour previous reply was rejected; the reasons follow."
    return text


def messages(
    builder: PromptBuilder,
    ctx: PromptContext,
    payload: CoachPayload,
    register: Register,
    errors: list[str],
) -> list[Message]:
    return builder.build(
        ctx,
        AGENT,
        instructions(payload, register, errors),
        data=[(DRAFT, payload.text)],
        rejected=errors[:6],
        kind="coach_reply",
    ).messages


def problems(
    text: str, payload: CoachPayload, register: Register, *, partial: bool = False
) -> list[str]:
    """What is wrong with a (partial) reply; empty means it may be shown.

    The one reply checker (coachbus.replycheck), which Synth uses too: on a
    partial reply only what more text cannot undo is judged (a blocked step, an
    artefact, the wrong language or register); length on the whole reply.
    """
    return check_reply(
        text,
        language=payload.language,
        register=register,
        never=payload.avoided_steps,
        min_words=MIN_WORDS,
        max_words=MAX_WORDS,
        partial=partial,
    )


def longest_marker(payload: CoachPayload) -> int:
    """How much trailing text to hold back while streaming: a marker split across
    two deltas must be caught before its first half is shown."""
    lengths = [
        len(m) for s in payload.avoided_steps if s in CATALOGUE for m in CATALOGUE[s].markers
    ]
    return max(lengths, default=0)
