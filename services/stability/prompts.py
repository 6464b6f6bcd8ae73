"""Stability's LLM tiers: the crisis screen for paraphrases the regex misses, and
blocked steps the catalogue's triggers miss.

Both answers can only add to the deterministic screen (see ``logic.assess``), so
the checks here guard against the other failure: a model inventing a crisis or a
risky plan. Every claim must quote the person's own words, verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.llm import Message, PromptBuilder, PromptContext, Severity
from coachbus.safety import CATALOGUE, is_crisis

AGENT = "stability"
MIN_QUOTE_CHARS = 8
_STEP_IDS: list[JsonValue] = list(sorted(CATALOGUE))


class RiskScreenCall(BaseModel):
    """The model's crisis screen of the last message."""

    model_config = ConfigDict(extra="forbid")

    category: CrisisCategory
    confidence: float = Field(ge=0, le=1)
    evidence: list[str] = Field(
        max_length=4, description="the person's exact words that show it; empty for none"
    )


class StepClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # An enum in the schema: a constrained decoder can only name catalogue steps.
    step_id: str = Field(json_schema_extra={"enum": _STEP_IDS})
    evidence: str = Field(description="the person's exact words that show the plan")


class BlockedStepsCall(BaseModel):
    """Risky steps from the catalogue the last message heads toward."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepClaim] = Field(max_length=6)


@dataclass(slots=True)
class RiskDecision:
    screen: CrisisScreen
    claim: RiskScreenCall | None = None


@dataclass(slots=True)
class StepsDecision:
    # (step id, evidence) the model added; the deterministic steps are kept anyway.
    added: list[tuple[str, str]] = field(default_factory=list)
    claims: list[StepClaim] = field(default_factory=list)


def normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def quote_problems(quotes: list[str], message: str, what: str) -> list[str]:
    """Quotes must be the person's own words: verbatim (case and spacing aside)."""
    said = normalise(message)
    out: list[str] = []
    for q in quotes:
        n = normalise(q).strip(" \"'„“”.,")
        if len(n) < MIN_QUOTE_CHARS or len(n.split()) < 2:
            out.append(f"{what}: quote too short to show anything: {q!r}")
        elif n not in said:
            out.append(f"{what}: quote is not in the message: {q!r}")
    return out


def check_risk(decision: RiskDecision, message: str) -> list[str]:
    claim = decision.claim
    if claim is None or claim.category is CrisisCategory.NONE:
        return []
    if not claim.evidence:
        return [f"{claim.category.value}: no quote of the person's words given"]
    return quote_problems(claim.evidence, message, claim.category.value)


def check_steps(decision: StepsDecision, message: str) -> list[str]:
    out: list[str] = []
    for claim in decision.claims:
        if claim.step_id not in CATALOGUE:
            out.append(f"unknown step id {claim.step_id!r}")
            continue
        out.extend(quote_problems([claim.evidence], message, claim.step_id))
    return out


def severity(decision: RiskDecision) -> Severity | None:
    """Only a crisis goes to a human; a risky plan is handled by blocking the step."""
    screen = decision.screen
    if not is_crisis(screen):
        return None
    return "critical" if screen.confidence >= 0.5 else "high"


RISK_INSTRUCTIONS = (
    "Screen the person's last message for a crisis. Categories: suicidal_ideation "
    "(wanting to die, not wanting to wake up, being a burden, indirect or paraphrased "
    "too), self_harm, abuse (someone hurting, threatening or controlling them), "
    "medical_emergency, or none. Figures of speech ('this job is killing me') are "
    "none. If it is a crisis, quote the person's exact words that show it in "
    "'evidence'; for none leave 'evidence' empty. 'confidence' is how sure you are, "
    "0 to 1."
)


def steps_instructions(conditions: list[str]) -> str:
    # The catalogue of risky steps is in the briefing's reference (shared prefix).
    known = ", ".join(conditions) if conditions else "none known"
    return (
        "Which of the reference's risky steps is the person's last message heading "
        "toward, including plans said in other words? Answer with their ids.\n"
        f"Standing conditions of this person: {known}.\n"
        "List only steps the message itself shows, each with the person's exact words "
        "as 'evidence'; an empty list when none."
    )


def with_repair(instructions: str, errors: list[str]) -> str:
    if not errors:
        return instructions
    # The reasons quote the model's evidence (the person's words): they follow as
    # fenced data in a user message (``messages``), not in these instructions.
    return instructions + "\n\nYour previous answer was rejected; the reasons follow."


def messages(
    builder: PromptBuilder, ctx: PromptContext, instructions: str, errors: list[str]
) -> list[Message]:
    return builder.build(
        ctx, AGENT, with_repair(instructions, errors), rejected=errors[:6]
    ).messages
