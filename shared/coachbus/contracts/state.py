"""Per-user state records kept in compacted topics (one writer each).

Each record carries ``applied_turns``: the last turn ids its writer folded in,
so a redelivered message is recognised and not applied twice.

Every record is rewritten whole on every turn (compaction keeps only the latest
per user key), so each collection below has a hard cap: a record must not grow
with the length of a user's history.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coachbus.contracts.events import utcnow
from coachbus.contracts.payloads import (
    CheckInAnswer,
    CheckInQuestion,
    CrisisCategory,
    CrisisScreen,
    Language,
    PatternClass,
    Register,
    renamed_fields,
)

APPLIED_TURNS_KEPT = 64

# Caps that keep a rewritten-every-turn record small (a few KB at most).
MAX_GOALS = 10
MAX_DOMAINS = 12
MAX_QUOTES = 3
MAX_SESSIONS = 24
MAX_CRISIS_EVENTS = 8
MAX_CHECK_INS = 8
MAX_RISK_CUES = 24
QUOTE_CHARS = 160


class StateRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    user_id: str
    version: int = Field(default=0, ge=0)
    updated_at: datetime = Field(default_factory=utcnow)
    applied_turns: list[str] = Field(default_factory=list)
    # Fields older writers stored and this version no longer keeps: dropped on
    # read, so a record written before the change still loads (extra="forbid").
    RETIRED: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.RETIRED & data.keys():
            return {k: v for k, v in data.items() if k not in cls.RETIRED}
        return data

    def has_applied(self, turn_id: str) -> bool:
        return turn_id in self.applied_turns

    def mark_applied(self, turn_id: str) -> None:
        self.applied_turns.append(turn_id)
        del self.applied_turns[:-APPLIED_TURNS_KEPT]
        self.version += 1
        self.updated_at = utcnow()


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Old field name -> new name, accepted on read (see ``renamed_fields``).
    RENAMED: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _read_renamed(cls, data: Any) -> Any:
        return renamed_fields(data, cls.RENAMED)


# --------------------------------------------------------------------------- Shadow


# Blackboard v2 calls a life domain a domain (v1: "topic", which read like a Kafka
# topic): GoalRecord.domain, DomainRecord.domain, Blackboard.domains, last_domains.
# A v1 board loads with its old names and is upgraded on read (written back as v2).
BLACKBOARD_VERSION: Literal[2] = 2
_TOPIC_IS_DOMAIN: Mapping[str, str] = {"topic": "domain"}


class GoalRecord(_Part):
    goal_id: str
    domain: str | None = None
    text: str
    quote: str
    first_seen_session: str
    # Only the most recent session ids are kept; ``session_count`` keeps the total.
    sessions: list[str] = Field(default_factory=list)
    session_count: int = Field(default=1, ge=1)
    mentions: int = Field(default=1, ge=1)
    progress: int = Field(default=0, ge=0)
    setbacks: int = Field(default=0, ge=0)
    # Turn indices (board.turn_count) of the last progress report: steady progress
    # needs reports in different turns, not one enthusiastic message.
    progress_turns: list[int] = Field(default_factory=list)
    last_turn: int = Field(default=0, ge=0)
    evidence: list[str] = Field(default_factory=list)
    RENAMED = _TOPIC_IS_DOMAIN


class DomainRecord(_Part):
    domain: str
    # Exponentially decayed word count: what the user spends words (and reported
    # time) on lately, not over their whole history.
    weight: float = Field(default=0.0, ge=0)
    mentions: int = Field(default=0, ge=0)
    last_quote: str = ""
    last_turn: int = Field(default=0, ge=0)
    RENAMED = _TOPIC_IS_DOMAIN


class PatternRecord(_Part):
    pattern: PatternClass
    occurrences: int = Field(default=0, ge=0)
    session_count: int = Field(default=0, ge=0)
    last_session: str | None = None
    last_turn: int = Field(default=0, ge=0)
    evidence: list[str] = Field(default_factory=list)


class Blackboard(StateRecord):
    """Shadow's cross-session picture of a user (topic ``blackboard``)."""

    schema_version: Literal[2] = BLACKBOARD_VERSION
    goals: list[GoalRecord] = Field(default_factory=list)
    # Life domain -> what the user spends words on there (capped at MAX_DOMAINS).
    domains: dict[str, DomainRecord] = Field(default_factory=dict)
    patterns: dict[PatternClass, PatternRecord] = Field(default_factory=dict)
    sessions: list[str] = Field(default_factory=list)
    session_count: int = Field(default=0, ge=0)
    turn_count: int = Field(default=0, ge=0)
    # The user's du/Sie as last shown in a message (UserMessage.address): the one
    # memory of it Coach reads. The language is decided per message, not stored.
    formality: Register | None = None
    RETIRED = frozenset({"language"})
    # The user's primary pattern, as Shadow names it (services/shadow/logic.py):
    # written here so every other agent reads the one answer instead of recomputing
    # it with a formula of its own. None until Shadow has seen a sure enough pattern
    # (and on a board written before this field existed, until its next turn).
    primary_pattern: PatternClass | None = None
    # What the last applied turn was about, so the payload can be recomputed from
    # the board alone (idempotent redelivery).
    last_focus_goal: str | None = None
    last_signals: list[str] = Field(default_factory=list)
    last_domains: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _v1_upgrade(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version", 1) == 1:
            data = renamed_fields(data, {"topics": "domains", "last_topics": "last_domains"})
            data = {**data, "schema_version": BLACKBOARD_VERSION}
        return data


# --------------------------------------------------------------------------- Persona


class ItemEvidence(_Part):
    """Accumulated evidence for one BFI-10 item (1..10)."""

    agree: float = Field(default=0.0, ge=0)
    disagree: float = Field(default=0.0, ge=0)
    count: int = Field(default=0, ge=0)
    last_cue: str = ""


class PersonaProfile(StateRecord):
    """Persona's accumulated evidence (topic ``profiles``)."""

    items: dict[int, ItemEvidence] = Field(default_factory=dict)
    sessions: list[str] = Field(default_factory=list)
    session_count: int = Field(default=0, ge=0)
    turns_seen: int = Field(default=0, ge=0)
    # goal id -> the last sessions it was mentioned in (capped), for recurring goals
    # even when Shadow's board lags or is missing.
    goal_sessions: dict[str, list[str]] = Field(default_factory=dict)
    # The user's du/Sie as last shown in a message, for Plasticity (which reads
    # this profile, not the board). The language is decided per message.
    formality: Register | None = None
    RETIRED = frozenset({"language"})
    # Shadow's last known primary pattern and follow-through evidence, carried so
    # Plasticity (which only sees this profile) can pick a strategy that fits.
    last_pattern: PatternClass | None = None
    progress_reports: int = Field(default=0, ge=0)
    setback_reports: int = Field(default=0, ge=0)
    # Turns in which the person reached for something big ("my dream", "all in"),
    # and turns reporting a plan kept: together the record Persona's stretch rests
    # on, even on a turn that names no goal of its own.
    ambition_turns: int = Field(default=0, ge=0)
    kept_turns: int = Field(default=0, ge=0)
    # Of those, the turns that reached for something big themselves ("I aim high",
    # "all in this time"), not only a goal stated: an ambitious person, whom Persona
    # pushes to stretch even before any plan was kept (Synth weighs the push against
    # Shadow's evidence and Stability's blocks, and lets it through only on track).
    reach_turns: int = Field(default=0, ge=0)


# --------------------------------------------------------------------------- Stability


class ActiveBlock(_Part):
    step_id: str
    since_turn: int = Field(ge=0)
    expires_turn: int = Field(ge=0)
    session_id: str
    trigger: str = ""


class CrisisEvent(_Part):
    category: CrisisCategory
    turn: int = Field(ge=0)
    session_id: str
    confidence: float = Field(ge=0, le=1)


class OpenCheckIn(_Part):
    """A question our reply asked and the person has not answered yet: their next
    message is read as the answer to it first (coachbus.safety.conversation)."""

    question: CheckInQuestion
    # The crisis the "are you safe right now?" question followed (none for our check-in).
    category: CrisisCategory = CrisisCategory.NONE
    turn: int = Field(ge=0)
    turn_id: str
    language: Language
    asked_at: datetime
    # How often it was asked: an unclear answer asks again, up to the data's limit.
    asks: int = Field(default=1, ge=1)


class ClosedCheckIn(_Part):
    question: CheckInQuestion
    # "expired": no answer came within the window (the next message was read afresh).
    answer: CheckInAnswer | Literal["expired"]
    turn: int = Field(ge=0)
    at: datetime


class RiskCue(_Part):
    """One warning sign seen in a message, kept with its time so it can decay."""

    family: str
    turn: int = Field(ge=0)
    at: datetime
    # The person's words that showed it (or the screen outcome), for a reviewer.
    evidence: str = ""


class TurnReading(_Part):
    """The conversation's reading of the last turn this state applied, so a reader
    whose view already holds this turn (Coach racing Stability) gets the same answer
    the state was folded with, not a second reading of a state that has moved on."""

    turn_id: str
    screen: CrisisScreen
    answered: CheckInAnswer | None = None


class SafetyState(StateRecord):
    """Stability's memory of blocked steps and crises (topic ``safety``)."""

    turn_count: int = Field(default=0, ge=0)
    active_blocks: dict[str, ActiveBlock] = Field(default_factory=dict)
    # Standing conditions that change what is risky (injury, medication, abuse,
    # eating concern, financial strain) -> turn index at which they expire.
    conditions: dict[str, int] = Field(default_factory=dict)
    crisis_history: list[CrisisEvent] = Field(default_factory=list)
    last_session: str | None = None
    # The conversation's safety memory (coachbus.safety.conversation): the question our
    # last reply asked, how earlier ones were answered, and recent warning signs.
    open_check_in: OpenCheckIn | None = None
    check_ins: list[ClosedCheckIn] = Field(default_factory=list)
    risk_cues: list[RiskCue] = Field(default_factory=list)
    last_reading: TurnReading | None = None
    # Nothing of the safety state depends on language or du/Sie.
    RETIRED = frozenset({"language", "formality"})
