"""Synth's LLM tier: prose from the DecisionSheet alone.

The model never sees another agent's payload: everything it may say (and must not
say) is in the sheet, decided in code. The sheet is handed over as a plain brief,
not as JSON, so there are no field names in the prompt for the prose to echo
(``logic.validate`` would reject them as merge artefacts anyway).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import DecisionSheet
from coachbus.llm import Message, PromptBuilder, PromptContext
from coachbus.safety.steps import CATALOGUE

AGENT = "synth"


class Prose(BaseModel):
    """The LLM's answer: the final reply as one text.

    The model writes it as plain text, not as JSON: Synth streams the reply to the
    user sentence by sentence while it is written (coachbus.reply_stream), and plain
    text can be cut at sentence ends as it arrives, where a JSON string would have to be
    unescaped incrementally (and a model that drifts out of its JSON would leave
    half a sentence unusable). The router still sees this model: the streaming
    client wraps the finished text in it, so its length bound holds as before.
    """

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=2400)


_LANG = {"en": "English", "de": "German"}
_REGISTER = {
    ("de", "informal"): "informal: address the person as 'du'",
    ("de", "formal"): "formal: address the person as 'Sie'",
}
_MODE = {
    "coach": "an ordinary coaching turn",
    "safety": "the person is heading for a risky step: acknowledge the drive, steer to the "
    "safer alternative",
    "crisis": "a crisis: no coaching at all, only care and the help lines",
    "care": "the turn right after a crisis: a gentle check-in, remind of the help lines",
    # The crisis screen was unsure (risk cues, no rule): the sheet's mode since the
    # screen reports uncertainty; without this entry such a sheet would fail here.
    "check_in": "the message has risk cues the screen could not read either way: ask "
    "directly and kindly how they are, no coaching push, mention the help lines",
}


def _level(x: float) -> str:
    return "low" if x < 0.35 else ("high" if x > 0.65 else "medium")


# The person's own words on the sheet (the goal, the pattern's quote) are data: they
# go to a fenced user-role block (``sheet_data``), and the brief, which is system-role
# instructions, only points to them. Everything else on the sheet is decided in code
# from fixed vocabularies (catalogue steps, help lines, enums).
GOAL = "goal in focus"
QUOTE = "pattern evidence"


def sheet_data(sheet: DecisionSheet) -> list[tuple[str, str]]:
    """The user-derived texts of the sheet, as (about, text) for the data block."""
    out: list[tuple[str, str]] = []
    if sheet.focus_goal is not None:
        out.append((GOAL, sheet.focus_goal.text))
    if sheet.pattern is not None and sheet.pattern_evidence:
        out.append((QUOTE, sheet.pattern_evidence))
    return out


def sheet_brief(sheet: DecisionSheet) -> str:
    """The sheet as plain sentences: what to say, how, and what never to say."""
    lines = [
        f"Write in {_LANG[sheet.language]}"
        + (f", {_REGISTER[(sheet.language, sheet.formality)]}" if sheet.language == "de" else "")
        + ".",
        f"Length: between {sheet.min_words} and {sheet.max_words} words; "
        f"reading level {sheet.reading_level}.",
        f"Tone: warmth {_level(sheet.tone.warmth)}, directness {_level(sheet.tone.directness)}, "
        f"challenge {_level(sheet.tone.challenge)}, autonomy support "
        f"{_level(sheet.tone.autonomy_support)}.",
        f"Situation: {_MODE[sheet.mode]}.",
        f"Coaching approach: {sheet.strategy.value.replace('_', ' ')}.",
    ]
    goal = sheet.focus_goal
    if goal is not None:
        facts = [f"The goal in focus is in the person's words in the data block about '{GOAL}'."]
        if goal.follow_through is not None:
            facts.append(f"Estimated chance they act on it soon: about {goal.follow_through}%.")
        if goal.avoided:
            facts.append("They have stated it repeatedly without acting on it.")
        lines.append(" ".join(facts))
    if sheet.signal.value != "none":
        lines.append(f"What this message reports: {sheet.signal.value.replace('_', ' ')}.")
    if sheet.pattern is not None:
        pattern = f"A behaviour pattern to name gently: {sheet.pattern.value.replace('_', ' ')}"
        if sheet.pattern_evidence:
            pattern += f", shown when they said what the data block about '{QUOTE}' quotes"
        lines.append(pattern + ".")
    if sheet.stretch:
        lines.append("You may encourage them to stretch this goal a little.")
    if sheet.gentle:
        lines.append("They had a crisis recently: no hard truths, no forecasts.")
    if sheet.never_say:
        lines.append(
            "Never suggest or mention these steps: "
            + "; ".join(f"{b.step} ({b.reason})" for b in sheet.never_say)
            + "."
        )
    guarded = [CATALOGUE[s] for s in sheet.guarded_steps if s in CATALOGUE]
    if guarded:
        # Conditions remembered from earlier turns make these dangerous now too.
        lines.append(
            "Given what they told you earlier, never suggest: "
            + "; ".join(f"{g.step} ({g.reason})" for g in guarded)
            + "."
        )
        alternatives = [b.safer_alternative for b in sheet.never_say if b.safer_alternative]
        if alternatives:
            lines.append("Safer alternatives you may offer: " + "; ".join(alternatives) + ".")
    if sheet.resources:
        lines.append("Include these help lines word for word: " + " ".join(sheet.resources))
    return "\n".join(lines)


INSTRUCTIONS = (
    "You are writing the coach's final reply to the person's last message. Use only "
    "the brief below; do not add facts about the person. Write natural, warm prose "
    "addressed to them: no lists, no headings, no labels, no brackets, no technical "
    "terms, never mention any system, agent or analysis. End with at most one question.\n"
    "Answer with the reply itself, as plain text: no JSON, no quotes around it, "
    "nothing before or after it.\n\nBrief:\n{brief}"
)


# The reply's first sentence when Synth shows it before the model writes (the
# rendering's acknowledgement: code-written from fixed phrases, checked when built).
OPENING = (
    "\n\nThe reply already begins with this sentence, which the person is reading "
    'while you write: "{opening}" Write only what follows it, as its continuation: do '
    "not repeat or rephrase it. The length above includes it."
)


def instructions(sheet: DecisionSheet, errors: list[str], opening: str = "") -> str:
    text = INSTRUCTIONS.format(brief=sheet_brief(sheet))
    if opening:
        text += OPENING.format(opening=opening)
    if errors:
        # The reasons quote the rejected reply: they follow as fenced data in the last
        # message, so everything before it stays cached between attempts.
        text += "\n\nYour previous reply was rejected; the reasons follow."
    return text


def messages(
    builder: PromptBuilder,
    ctx: PromptContext,
    sheet: DecisionSheet,
    errors: list[str],
    opening: str = "",
) -> list[Message]:
    return builder.build(
        ctx,
        AGENT,
        instructions(sheet, errors, opening),
        data=sheet_data(sheet),
        rejected=errors[:6],
        kind="synthesis_prose",
    ).messages


def clean(parsed: BaseModel) -> str:
    """Whitespace normalised, nothing else: every other fix is the validator's call."""
    if not isinstance(parsed, Prose):
        raise TypeError(f"expected Prose, got {type(parsed).__name__}")
    return " ".join(parsed.text.split())
