"""Typed payloads: what each agent decides, as it travels on its topic.

These are contracts between independently deployed services: add optional
fields freely, but renaming or removing one is a new ``schema_version``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

Score01 = float
Language = Literal["en", "de"]
Register = Literal["informal", "formal"]
RiskLevel = Literal["low", "moderate", "high", "critical"]

# The five agents a turn fans out to, in the order results are shown: the one list
# (events, topics, Synth's join and the tests import it from here).
AgentName = Literal["shadow", "persona", "plasticity", "stability", "coach"]
AGENTS: Final[tuple[AgentName, ...]] = ("shadow", "persona", "plasticity", "stability", "coach")
# Who thinks a decision through, cheapest first: the one order (the router checks a
# policy's tiers go up; a decision taken on several tiers reports the highest).
Tier = Literal["deterministic", "small", "strong", "human"]
TIER_RANK: Final[dict[Tier, int]] = {"deterministic": 0, "small": 1, "strong": 2, "human": 3}


def renamed_fields(data: Any, renamed: Mapping[str, str]) -> Any:
    """``data`` with each old field name (a key of ``renamed``) read as its new name.

    A record written before a rename (stored state, a message still in flight) keeps
    loading. A record that carries both names is left alone, so extra="forbid"
    refuses it instead of silently picking one."""
    if not isinstance(data, dict) or not renamed.keys() & data.keys():
        return data
    return {
        (renamed[k] if k in renamed and renamed[k] not in data else k): v for k, v in data.items()
    }


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)
    # Old field name -> new name, accepted on read (see ``renamed_fields``).
    RENAMED: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _read_renamed(cls, data: Any) -> Any:
        return renamed_fields(data, cls.RENAMED)


# A life domain (work, fitness, money…) used to be called a "topic", which read like a
# Kafka topic: records written before the rename still load under the old names.
_TOPIC_IS_DOMAIN: Final[Mapping[str, str]] = {"topic": "domain"}


# --------------------------------------------------------------------------- Shadow


class PatternClass(StrEnum):
    """The fixed taxonomy of behaviour patterns (documented in docs/patterns.md)."""

    AVOIDANCE = "avoidance"
    OVERCOMMITMENT = "overcommitment"
    PERFECTIONISM = "perfectionism"
    ALL_OR_NOTHING = "all_or_nothing"
    PROCRASTINATION = "procrastination"
    SELF_CRITICISM = "self_criticism"
    STEADY_PROGRESS = "steady_progress"
    RESTARTING = "restarting"


class StatedGoal(_Model):
    goal_id: str = Field(description="stable slug of the goal, used as its key")
    text: str = Field(description="the goal in the user's own words, normalised")
    quote: str = Field(description="verbatim quote the goal was extracted from")
    sessions_mentioned: int = Field(ge=1)
    first_seen_session: str
    # The life domain (fitness, writing, business…) the goal belongs to, if recognised:
    # lets other agents talk about the goal without pasting the user's sentence back.
    domain: str | None = None
    progress_reports: int = Field(default=0, ge=0)
    setback_reports: int = Field(default=0, ge=0)
    RENAMED = _TOPIC_IS_DOMAIN


class ActualPriority(_Model):
    domain: str = Field(description="the life domain")
    share: Score01 = Field(ge=0, le=1, description="share of the user's words on this domain")
    evidence: str
    RENAMED = _TOPIC_IS_DOMAIN


class FollowThroughPrediction(_Model):
    goal_id: str
    probability: int = Field(ge=0, le=100)
    reasons: list[str]
    # How many progress/setback reports the number rests on; 0 means it is a prior,
    # and Synth only lets Shadow overrule Persona when it rests on evidence.
    evidence: int = Field(default=0, ge=0)


class PatternEvidence(_Model):
    pattern: PatternClass
    confidence: Score01 = Field(ge=0, le=1)
    occurrences: int = Field(ge=1)
    evidence: list[str] = Field(description="quotes that show the pattern")
    # Turns since the pattern last showed (0 = in the latest message): lets Synth name
    # a pattern when it is live, not on every turn after it was once seen.
    turns_since: int = Field(default=0, ge=0)


class TurnSignal(StrEnum):
    """What the latest message did with respect to the user's goals."""

    NEW_GOAL = "new_goal"
    REPEATED_GOAL = "repeated_goal"
    PROGRESS = "progress"
    SETBACK = "setback"
    NONE = "none"


class ShadowPayload(_Model):
    stated_goals: list[StatedGoal]
    actual_priorities: list[ActualPriority]
    avoided_goals: list[str] = Field(description="goal ids stated but repeatedly not acted on")
    follow_through: list[FollowThroughPrediction]
    patterns: list[PatternEvidence]
    primary_pattern: PatternClass | None
    blackboard_version: int = Field(ge=0)
    # Confidence of the pattern classification (the primary pattern's), for the router.
    confidence: Score01 = Field(default=0.0, ge=0, le=1)
    focus_goal: str | None = Field(default=None, description="goal id the last message was about")
    signals: list[TurnSignal] = Field(default_factory=list)
    message_domains: list[str] = Field(
        default_factory=list, description="life domains the last message touched"
    )
    RENAMED = {"message_topics": "message_domains"}


# --------------------------------------------------------------------------- Persona


class Trait(StrEnum):
    OPENNESS = "openness"
    CONSCIENTIOUSNESS = "conscientiousness"
    EXTRAVERSION = "extraversion"
    AGREEABLENESS = "agreeableness"
    NEUROTICISM = "neuroticism"


class TraitEstimate(_Model):
    value: Score01 = Field(ge=0, le=1)
    confidence: Score01 = Field(ge=0, le=1)
    evidence_count: int = Field(ge=0)


class ItemScore(_Model):
    """One BFI-10 item, scored 1..5 from accumulated textual evidence."""

    item: int = Field(ge=1, le=10)
    score: float = Field(ge=1, le=5)
    evidence_count: int = Field(ge=0)


# The stretch target when Persona reads a record of ambition but no goal or domain: the
# plan the conversation is about (rendered as the generic "plan" in replies).
PLAN_IN_PLAY: Final = "plan"


class PersonaPayload(_Model):
    ocean: dict[Trait, TraitEstimate]
    items: list[ItemScore]
    recurring_goals: list[str] = Field(description="goals seen in two or more sessions")
    follow_through_pct: float | None = Field(default=None, ge=0, le=100)
    growth_opportunities: list[str]
    sessions_seen: int = Field(ge=0)
    # Whether follow_through_pct is a trait-based guess, evidence, or a blend of both.
    follow_through_basis: Literal["prior", "blended", "evidence"] | None = None
    # Goal ids Persona suggests stretching (its "push for ambition"), or PLAN_IN_PLAY;
    # Synth weighs these against Stability's blocked steps and Shadow's patterns.
    stretch_goals: list[str] = Field(default_factory=list)
    # Confidence of the OCEAN update as a whole (mean trait confidence), for the router.
    confidence: Score01 = Field(default=0.0, ge=0, le=1)


# --------------------------------------------------------------------------- Plasticity


class CoachingStrategy(StrEnum):
    MOTIVATIONAL_INTERVIEWING = "motivational_interviewing"
    IMPLEMENTATION_INTENTIONS = "implementation_intentions"
    HABIT_STACKING = "habit_stacking"
    SOLUTION_FOCUSED = "solution_focused"
    COGNITIVE_REFRAMING = "cognitive_reframing"
    VALUES_CLARIFICATION = "values_clarification"
    SELF_COMPASSION = "self_compassion"


class CommunicationPreferences(_Model):
    """How to talk to the user this turn (Plasticity; PlasticityResult v2).

    v2 renamed ``register`` to ``formality`` (the name shadowed
    ``BaseModel.register``); a v1 record's ``register`` is read as ``formality``."""

    directness: Score01 = Field(ge=0, le=1)
    structure: Score01 = Field(ge=0, le=1)
    warmth: Score01 = Field(ge=0, le=1)
    challenge: Score01 = Field(ge=0, le=1)
    autonomy_support: Score01 = Field(ge=0, le=1)
    length: Literal["short", "medium", "long"]
    formality: Register = Field(description="du/Sie in German")
    reading_level: Literal["simple", "standard", "advanced"]

    @model_validator(mode="before")
    @classmethod
    def _v1_register(cls, data: Any) -> Any:
        if isinstance(data, dict) and "register" in data and "formality" not in data:
            data = {("formality" if k == "register" else k): v for k, v in data.items()}
        return data


class PlasticityPayload(_Model):
    language: Language
    preferences: CommunicationPreferences
    strategy: CoachingStrategy
    strategy_rationale: str
    profile_confidence: Score01 = Field(ge=0, le=1)
    strategy_confidence: Score01 = Field(default=0.5, ge=0, le=1)


# --------------------------------------------------------------------------- Stability


class CrisisCategory(StrEnum):
    NONE = "none"
    SELF_HARM = "self_harm"
    SUICIDAL_IDEATION = "suicidal_ideation"
    ABUSE = "abuse"
    MEDICAL_EMERGENCY = "medical_emergency"


class Risk(_Model):
    risk_id: str
    description: str
    severity: int = Field(ge=1, le=5)
    detectability: int = Field(ge=1, le=5, description="5 = hardest to notice in time")
    reversibility: int = Field(ge=1, le=5, description="5 = hardest to undo")

    @model_validator(mode="before")
    @classmethod
    def _computed_priority_is_not_input(cls, data: Any) -> Any:
        # ``priority`` is serialised for consumers but derived, not stored: drop it on
        # the way in, or a round trip through the wire would fail extra="forbid".
        if isinstance(data, dict) and "priority" in data:
            return {k: v for k, v in data.items() if k != "priority"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def priority(self) -> int:
        return self.severity * self.detectability * self.reversibility


class BlockedStep(_Model):
    step: str = Field(description="what the coach must not suggest, in plain words")
    reason: str
    # Lower-case phrases whose presence in a reply means the step slipped through.
    markers: list[str]
    step_id: str = Field(default="", description="catalogue key, stable across turns")
    domain: str | None = Field(default=None, description="the life domain of the step")
    # What to offer instead, in plain English words; renderers use the catalogue's
    # localised version via step_id.
    safer_alternative: str = ""
    confidence: Score01 = Field(default=1.0, ge=0, le=1)
    RENAMED = _TOPIC_IS_DOMAIN


ScreenBasis = Literal["message", "check_in_answer", "trajectory"]
# The two questions a safety reply asks: our check-in ("are you having thoughts of
# ending your life?") and the crisis reply's last line ("are you safe right now?").
CheckInQuestion = Literal["suicide", "safety"]
# How a message answered the open question: "denied" and "safe" are believed (a
# caring turn follows), "affirmed" and "unsafe" are a crisis, "unclear" asks again.
CheckInAnswer = Literal["affirmed", "denied", "unclear", "safe", "unsafe"]


class CrisisScreen(_Model):
    category: CrisisCategory
    # How often this answer was right on labelled data (coachbus.safety.calibration):
    # for a crisis, the precision of the rule kind that fired; for "none", how often
    # "none" was right in its bucket (clean text, or text with risk cues).
    confidence: Score01 = Field(ge=0, le=1)
    matched: list[str]
    escalated: bool
    # Risk cues (death, dying, ending, self-harm, "nicht mehr") that no rule could
    # read either way: category stays "none", confidence is below the policy's bar
    # so a model double-checks, and without a model the person gets a direct,
    # gentle check-in with a help line and a human sees it at severity moderate.
    uncertain: bool = False
    # What the finding rests on: the message alone, the person's answer to a question
    # we asked (our check-in, or "are you safe right now?"), or warning signs that add
    # up across recent messages (coachbus.safety.conversation). A screen of the message
    # alone cannot see the last two: "ja" carries no risk word.
    basis: ScreenBasis = "message"
    # A way, a means at hand or a decided time is known (C-SSRS levels 5-6), or the
    # person said they are not safe: the review is critical, whatever the confidence.
    plan: bool = False
    # The open question this message answered, when it was not answered clearly: the
    # reply asks it again, gently, instead of asking a new one.
    question: CheckInQuestion | None = None
    # For a crisis: the question its reply asks back when it is not "are you safe
    # right now?" ("suicide": a burden or hopelessness message is followed by the
    # direct question about suicidal thoughts, the next rung of the C-SSRS). None:
    # the category's own question (safety; nothing after a medical emergency).
    asks: CheckInQuestion | None = None


class StabilityPayload(_Model):
    risks: list[Risk]
    blocked_steps: list[BlockedStep]
    crisis: CrisisScreen
    overall: RiskLevel
    # The previous message screened as a crisis: this turn is a check-in, not coaching.
    post_crisis: bool = False
    # Turns since the last crisis this user had (None: none remembered); Synth keeps
    # the tone gentle for a while afterwards.
    turns_since_crisis: int | None = Field(default=None, ge=0)
    # How this message answered the question our last reply asked (None: no question
    # was open, or it had expired). A denial gets a caring turn, not coaching at once.
    answered_check_in: CheckInAnswer | None = None
    # Confidence of the risk screen (crisis + blocked steps), for the router.
    confidence: Score01 = Field(default=1.0, ge=0, le=1)
    # Catalogue steps the person's remembered conditions make dangerous (training
    # while injured, confronting an abuser…) that this turn did not block: a reply
    # suggesting one is caught all the same.
    guarded_steps: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- Coach


class CoachPayload(_Model):
    text: str
    language: Language
    crisis_mode: bool
    grounded_on: list[str] = Field(description="what the reply drew on (blackboard, safety…)")
    confidence: Score01 = Field(default=0.5, ge=0, le=1)
    # Steps this reply was kept clear of (catalogue ids), so a reviewer can check it.
    avoided_steps: list[str] = Field(default_factory=list)
    # The crisis screen this reply acted on: the message read in its conversation
    # (Coach sees last turn's safety state). Synth falls back on it when Stability
    # is late, so a "yes" to our check-in is a crisis there too.
    crisis: CrisisScreen | None = None


# --------------------------------------------------------------------------- Synth


class SheetTone(_Model):
    warmth: Score01 = Field(ge=0, le=1)
    directness: Score01 = Field(ge=0, le=1)
    challenge: Score01 = Field(ge=0, le=1)
    autonomy_support: Score01 = Field(ge=0, le=1)


class SheetGoal(_Model):
    goal_id: str
    domain: str | None = Field(description="the goal's life domain, if recognised")
    text: str = Field(description="the goal in the user's words, short")
    follow_through: int | None = Field(default=None, ge=0, le=100)
    follow_through_source: Literal["shadow", "persona"] | None = None
    sessions: int = Field(default=1, ge=1)
    avoided: bool = False
    RENAMED = _TOPIC_IS_DOMAIN


# Synth's conflict rules (docs/mapping.md §4; services/synth/conflicts.py).
ConflictRule = Literal[
    "crisis_first", "safety_over_ambition", "safety_over_style", "evidence_over_guess"
]


class Conflict(_Model):
    """A disagreement between agents and how Synth resolved it: on the decision
    sheet and, unchanged, on the final Reply (the one model of it)."""

    topic: str
    winner: AgentName
    overruled: AgentName
    rule: ConflictRule
    detail: str


class DecisionSheet(_Model):
    """Everything the final reply may say, and must not say, decided in code.

    Both the deterministic renderer and the LLM prose writer work from this alone,
    so it carries facts and decisions, never finished sentences from an agent.
    """

    language: Language
    formality: Register = Field(description="du/Sie in German; informal in English")
    reading_level: Literal["simple", "standard", "advanced"]
    length: Literal["short", "medium", "long"]
    min_words: int = Field(ge=0)
    max_words: int = Field(ge=1)
    tone: SheetTone
    strategy: CoachingStrategy
    # coach: ordinary turn; safety: the user is heading for a blocked step; crisis:
    # the crisis screen fired; care: the turn right after a crisis (check-in only);
    # check_in: the screen was unsure (risk cues, no rule): ask directly and kindly.
    mode: Literal["coach", "safety", "crisis", "care", "check_in"]
    crisis: CrisisScreen
    # How this message answered the question our last reply asked: a "denied" care
    # turn thanks the person and believes them (not the after-crisis check-in).
    answered_check_in: CheckInAnswer | None = None
    resources: list[str] = Field(default_factory=list, description="help lines, localised")
    focus_goal: SheetGoal | None = None
    signal: TurnSignal = TurnSignal.NONE
    pattern: PatternClass | None = None
    pattern_occurrences: int = Field(default=0, ge=0)
    pattern_evidence: str | None = Field(default=None, description="a short quote of the user's")
    message_domains: list[str] = Field(default_factory=list)
    stretch: bool = Field(default=False, description="an ambition push survived the policy")
    gentle: bool = Field(default=False, description="soon after a crisis: no hard truths")
    never_say: list[BlockedStep] = Field(default_factory=list)
    # Steps the remembered conditions make dangerous, not blocked this turn: never
    # suggested either (StabilityPayload.guarded_steps).
    guarded_steps: list[str] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    seed: int = Field(default=0, ge=0, description="picks phrasing variants, from the turn id")
    confidence: Score01 = Field(default=0.5, ge=0, le=1)
    RENAMED = {"message_topics": "message_domains"}
