"""Synth's conflict policy (docs/mapping.md §4): when the agents disagree, which one
wins, and the record of it on the final reply.

One function per rule, named as the rule is on the wire (``Conflict.rule``):

* crisis_first: a crisis suspends coaching; Stability beats Plasticity's strategy
  and Persona's stretch.
* safety_over_ambition: Stability beats Persona's stretch when a blocked step
  clashes with it.
* safety_over_style: Stability caps Plasticity's challenge on a risky turn.
* evidence_over_guess: Shadow's evidence beats Persona's follow-through guess, and
  Shadow's observed patterns beat Persona's stretch when they argue against it.

Each returns its value and the conflicts it resolved (none when the rule did not
apply); ``logic.build_sheet`` applies them in the table's order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from coachbus.contracts.events import Conflict, PersonaResult, ShadowResult
from coachbus.contracts.payloads import (
    PLAN_IN_PLAY,
    BlockedStep,
    CoachingStrategy,
    FollowThroughPrediction,
    PatternClass,
    SheetTone,
)
from coachbus.normalize import NormalizedText
from coachbus.safety.steps import CATALOGUE, EVERY_CONDITION, step_screen

# What a reply does this turn: coach, steer clear of a risky step, or one of the
# safety modes.
Mode = Literal["coach", "safety", "crisis", "care", "check_in"]
# Modes whose reply is fixed, pre-checked text: never rewritten by a model, never
# widened, and gentle (crisis, the check-in after one, the check-in on an uncertain
# screen).
SAFETY_MODES: tuple[Mode, ...] = ("crisis", "care", "check_in")
# How crisis_first names a safety mode in the detail of its conflict.
SAFETY_MODE_NAMES: dict[str, str] = {
    "crisis": "crisis screen",
    "care": "check-in after a crisis",
    "check_in": "check-in on an uncertain crisis screen",
}
# Persona's follow-through guess and Shadow's evidence "disagree" beyond this gap.
FOLLOW_THROUGH_GAP = 20
# Challenge Plasticity may ask for while a risky step is on the table.
SAFE_CHALLENGE = 0.3
# Severity (the catalogue's 1-5 risk frame) from which a blocked step outweighs a
# stretch on any goal.
GRAVE = 5
# Shadow's patterns that argue against stretching a goal right now.
AGAINST_STRETCH = (
    PatternClass.OVERCOMMITMENT,
    PatternClass.ALL_OR_NOTHING,
    PatternClass.AVOIDANCE,
    PatternClass.SELF_CRITICISM,
    # A perfect run broken and "start over in January": Shadow often names the
    # all-or-nothing story by its perfectionism or its restart, and a bolder
    # commitment feeds both (conflicts dev round 4: +3 found, no new false record).
    PatternClass.PERFECTIONISM,
    PatternClass.RESTARTING,
)


# Which goal domains a blocked step's domain touches: a stretch on the startup
# clashes with a block on quitting the job or betting the savings, not with a block
# on training through an injury.
_RELATED: dict[str | None, frozenset[str]] = {
    "work": frozenset({"work", "business", "money"}),
    "money": frozenset({"money", "business", "work"}),
    "fitness": frozenset({"fitness"}),
    "nutrition": frozenset({"nutrition", "fitness"}),
    "sleep": frozenset({"sleep", "work", "study", "business"}),
    "relationships": frozenset({"relationships"}),
}


def _clashes(block: BlockedStep, target: str, message: str | NormalizedText) -> bool:
    """Does pushing ``target`` further risk the blocked step?"""
    spec = CATALOGUE.get(block.step_id)
    # The step was blocked, so whatever standing condition its combinations need
    # held when Stability blocked it (heavy drinking told turns before the stop).
    if spec is not None and spec.heads_for(message, EVERY_CONDITION):
        return True  # the user is heading for the blocked step right now
    if spec is not None and _read_now(spec.step_id, spec.needs_condition, message):
        # Found in this message by the step screen's learned reader, the reader that
        # made the block ("black coffee and one small salad a day till the wedding"
        # after a stretch on the weight goal): heading for it now, whatever the
        # stretch's domain. Conflicts dev round 4: the rules' words alone missed it.
        return True
    if block.domain is None:
        return True  # e.g. medication: any push is weighed against it
    if spec is not None and spec.severity >= GRAVE:
        # A step that can cost a life or a livelihood (confronting an abuser alone, all
        # the savings, stopping heavy drinking at once): no bolder commitment is pushed
        # anywhere on a turn it is blocked. Persona's goal on such a turn is often the
        # step itself, read as a goal ("I want to drive up next weekend and say
        # everything"; conflicts dev: three confrontations whose stretch was such a
        # goal). The protective reading.
        return True
    if target == PLAN_IN_PLAY:
        # Persona pushes "the plan in play" when it reads a record but no goal: the
        # plan the conversation is about, and a step blocked in it (this turn or
        # carried) is part of that plan. "Signing friday", "I'm going anyway" after the
        # loan or the fever told a turn before: the push would land on the step
        # (conflicts dev round 18 and earlier: five such items). When unsure which
        # plan Persona means, safety wins (the protective reading).
        return True
    return target in _RELATED.get(block.domain, frozenset({block.domain}))


def _read_now(step_id: str, condition: str, message: str | NormalizedText) -> bool:
    """Whether the step screen (rules and learned reader) finds ``step_id`` in
    ``message``; a step that needs a standing condition is read with it held, as the
    block it explains was made with it (the screen is memoised per message and
    condition, so several blocks of one turn cost one read)."""
    held = frozenset({condition}) if condition else frozenset()
    return any(h.spec.step_id == step_id for h in step_screen(message, held).hits)


def crisis_first(
    mode: Mode, *, strategy: CoachingStrategy | None = None, stretch: str | None = None
) -> tuple[bool, list[Conflict]]:
    """A crisis, the check-in on an uncertain screen, or the turn after a crisis
    suspends coaching: Stability beats Plasticity's ``strategy`` and Persona's
    ``stretch``. The value: whether coaching is suspended."""
    if mode not in SAFETY_MODES:
        return False, []
    found: list[Conflict] = []
    if strategy is not None:
        found.append(
            Conflict(
                topic="strategy",
                winner="stability",
                overruled="plasticity",
                rule="crisis_first",
                detail=(f"{SAFETY_MODE_NAMES[mode]}: {strategy.value} coaching suspended"),
            )
        )
    if stretch is not None:
        found.append(
            Conflict(
                topic=f"ambition:{stretch}",
                winner="stability",
                overruled="persona",
                rule="crisis_first",
                detail=f"stretch on {stretch} dropped during a crisis",
            )
        )
    return True, found


def safety_over_style(
    tone: SheetTone, mode: Mode, gentle: bool, *, from_plasticity: bool
) -> tuple[SheetTone, list[Conflict]]:
    """On a crisis, check-in or risky turn, or soon after a crisis, Stability caps
    Plasticity's challenge. The value: the tone the sheet uses."""
    if not ((mode != "coach" or gentle) and from_plasticity and tone.challenge > SAFE_CHALLENGE):
        return tone, []
    conflict = Conflict(
        topic="challenge",
        winner="stability",
        overruled="plasticity",
        rule="safety_over_style",
        detail=(
            f"challenge {tone.challenge:.2f} capped at {SAFE_CHALLENGE} "
            f"while the turn is {mode if mode != 'coach' else 'soon after a crisis'}"
        ),
    )
    return tone.model_copy(update={"challenge": SAFE_CHALLENGE}), [conflict]


def safety_over_ambition(
    target: str, never: Iterable[BlockedStep], message: str | NormalizedText
) -> tuple[bool, list[Conflict]]:
    """A blocked step that clashes with Persona's stretch on ``target`` beats it.
    The value: whether the stretch is dropped."""
    clashing = [b for b in never if _clashes(b, target, message)]
    if not clashing:
        return False, []
    steps = ", ".join(sorted(b.step_id or b.step for b in clashing))
    conflict = Conflict(
        topic=f"ambition:{target}",
        winner="stability",
        overruled="persona",
        rule="safety_over_ambition",
        detail=f"stretch on {target} dropped: blocked steps in play ({steps})",
    )
    return True, [conflict]


def evidence_over_guess_follow_through(
    goal_id: str, pred: FollowThroughPrediction | None, persona: PersonaResult | None
) -> tuple[int | None, list[Conflict]]:
    """Shadow's follow-through for the focus goal, resting on reports, beats
    Persona's guess when they differ by FOLLOW_THROUGH_GAP points or more. The value:
    the number the sheet uses (Shadow's when it rests on evidence, else none)."""
    observed = pred.probability if pred is not None and pred.evidence else None
    guess = persona.payload.follow_through_pct if persona is not None else None
    if (
        pred is None
        or pred.evidence < 1
        or guess is None
        or abs(guess - pred.probability) < FOLLOW_THROUGH_GAP
    ):
        return observed, []
    conflict = Conflict(
        topic="follow_through",
        winner="shadow",
        overruled="persona",
        rule="evidence_over_guess",
        detail=(
            f"{goal_id}: observed {pred.probability}% from "
            f"{pred.evidence} reports vs persona's {guess:.0f}% "
            f"({persona.payload.follow_through_basis if persona else 'n/a'})"
        ),
    )
    return observed, [conflict]


def evidence_over_guess_ambition(
    target: str, pattern: PatternClass | None, shadow: ShadowResult | None
) -> tuple[bool, list[Conflict]]:
    """The pattern named this turn (one that argues against stretching) or an
    avoided goal beats Persona's stretch on ``target``. The value: whether the
    stretch is dropped."""
    if shadow is None or not (pattern in AGAINST_STRETCH or target in shadow.payload.avoided_goals):
        return False, []
    conflict = Conflict(
        topic=f"ambition:{target}",
        winner="shadow",
        overruled="persona",
        rule="evidence_over_guess",
        detail=(
            f"stretch on {target} dropped: observed "
            f"{pattern.value if pattern else 'avoidance of this goal'}"
        ),
    )
    return True, [conflict]
