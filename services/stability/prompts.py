"""Stability's LLM tiers: the crisis screen for paraphrases the regex misses, and
blocked steps the catalogue's triggers miss.

Both answers can only add to the deterministic screen (see ``logic.assess``), so
the checks here guard against the other failure: a model inventing a crisis or a
risky plan. Every claim must quote the person's own words, verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from coachbus.contracts.payloads import CrisisScreen
from coachbus.llm import Message, PromptBuilder, PromptContext, Severity
from coachbus.llm.prompt import instruction_override
from coachbus.normalize import NormalizedText
from coachbus.safety.model import RiskScreenCall, check_claim, quote_problems
from coachbus.safety.screen import review_severity
from coachbus.safety.steps import CATALOGUE

AGENT = "stability"
_STEP_IDS: list[JsonValue] = list(sorted(CATALOGUE))


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


def check_risk(
    decision: RiskDecision, message: str | NormalizedText, *, answering: bool = False
) -> list[str]:
    if decision.claim is None:
        return []
    return check_claim(decision.claim, message, answering=answering)


def check_steps(decision: StepsDecision, message: str | NormalizedText) -> list[str]:
    out: list[str] = []
    for claim in decision.claims:
        if claim.step_id not in CATALOGUE:
            out.append(f"unknown step id {claim.step_id!r}")
            continue
        out.extend(quote_problems([claim.evidence], message, claim.step_id))
    return out


def severity(decision: RiskDecision) -> Severity | None:
    """The crisis screen's review rule (coachbus.safety.screen.review_severity); a risky
    plan is handled by blocking the step, not by a human."""
    return review_severity(decision.screen)


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
    builder: PromptBuilder,
    ctx: PromptContext,
    instructions: str,
    errors: list[str],
    kind: str | None = None,
    data: Sequence[tuple[str, str]] = (),
) -> list[Message]:
    """``data``: what the decision needs beyond the shared prefix (the question our
    last reply asked, recent warning signs); it holds the person's words, so it goes
    in the prompt's data fence, never in the instructions."""
    # The override (if any) replaces the instructions; the repair note follows it.
    if kind is not None:
        instructions = instruction_override(builder.settings.prompts_dir, kind, instructions)
    return builder.build(
        ctx, AGENT, with_repair(instructions, errors), data=data, rejected=errors[:6]
    ).messages
