"""Versioned event schemas for every topic. JSON on the wire.

Every event carries ``schema_version``, ``turn_id``, ``session_id``, ``user_id`` and
``created_at``. Consumers refuse a ``schema_version`` they do not know (the message
is dead-lettered with the reason) instead of guessing.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

# Defined with the payloads (the decision sheet needs them too), re-exported here.
from coachbus.contracts.payloads import AGENTS as AGENTS
from coachbus.contracts.payloads import TIER_RANK as TIER_RANK
from coachbus.contracts.payloads import AgentName as AgentName
from coachbus.contracts.payloads import (
    CoachPayload,
    Language,
    PersonaPayload,
    PlasticityPayload,
    Register,
    RiskLevel,
    ShadowPayload,
    StabilityPayload,
)
from coachbus.contracts.payloads import Conflict as Conflict
from coachbus.contracts.payloads import Tier as Tier
from coachbus.text import detect_language, detect_register

SCHEMA_VERSION: Literal[1] = 1
DLQ_ORIGINAL_MAX = 64 * 1024


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_turn_id() -> str:
    """A UUIDv7 (RFC 9562) as 32 hex digits: its first 48 bits are the time it was
    made, in ms. Every record derived from a turn carries its id, so any consumer can
    tell whether the turn began before a user's erase (see ``turn_started_at``)."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & (2**62 - 1)
    return f"{value:032x}"


def turn_started_at(turn_id: str) -> datetime | None:
    """When a turn id of ``new_turn_id`` was made; None for any other id."""
    if len(turn_id) != 32 or turn_id[12] != "7":
        return None
    try:
        ms = int(turn_id[:12], 16)
    except ValueError:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC)


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    turn_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    user_id: str = Field(min_length=1, max_length=128)
    created_at: datetime = Field(default_factory=utcnow)


class TurnBudget(BaseModel):
    """What a turn may spend on LLM calls, fixed when the turn is accepted.

    It travels inside the message, so a redelivered message brings the same
    absolute deadline and cannot refill the budget.
    """

    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(ge=0)
    deadline_at: datetime


# UserMessage v2 carries the turn's language and du/Sie, decided once where the
# message enters (the gateway); v1 records (written before) are decided on read
# with the same function, so consumers accept both while the old ones drain.
USER_MESSAGE_VERSION: Literal[2] = 2


def language_and_address(
    text: str, hint: Language | None = None, earlier: Language | None = None
) -> tuple[Language, Register | None]:
    """The language of ``text`` and, in German, the du/Sie it shows (None: not shown).

    The one place a turn's language is decided: ``hint`` wins near a tie, then
    ``earlier`` (what the caller knew of the conversation before: a short "ok" does
    not switch language), then English. English has no du/Sie: None."""
    language = detect_language(text, hint, earlier)
    return language, detect_register(text) if language == "de" else None


class UserMessage(Event):
    schema_version: Literal[1, 2] = USER_MESSAGE_VERSION  # type: ignore[assignment]
    kind: Literal["message"] = "message"
    text: str = Field(min_length=1)
    language_hint: Language | None = None
    # v2: decided once where the message enters (``language_and_address``); every
    # agent uses these instead of reading the text again.
    # Never left at its default: a record without it is decided on read (below).
    language: Language = Field(
        default="en", description="the turn's language, decided at the gateway"
    )
    address: Register | None = Field(
        default=None, description="du (informal) / Sie (formal) the message shows, if any"
    )
    deadline_at: datetime = Field(description="Synth answers degraded if agents miss this")
    budget: TurnBudget

    @model_validator(mode="before")
    @classmethod
    def _decide_v1_on_read(cls, data: Any) -> Any:
        # A v1 record has no language: decide it now, from the text alone (the
        # gateway's knowledge of the conversation is not in the record).
        if isinstance(data, dict) and "language" not in data and isinstance(data.get("text"), str):
            hint = data.get("language_hint")
            language, address = language_and_address(
                data["text"], hint if hint in ("en", "de") else None
            )
            data = {**data, "language": language, "address": address}
        return data

    @classmethod
    def create(
        cls,
        *,
        user_id: str,
        session_id: str,
        text: str,
        deadline_ms: int,
        max_tokens: int,
        wall_clock_ms: int,
        turn_id: str | None = None,
        earlier: Language | None = None,
    ) -> UserMessage:
        """A new turn; ``earlier``: the conversation's language as the caller knows it."""
        now = utcnow()
        language, address = language_and_address(text, None, earlier)
        return cls(
            turn_id=turn_id or new_turn_id(),
            session_id=session_id,
            user_id=user_id,
            created_at=now,
            text=text,
            language=language,
            address=address,
            deadline_at=now + timedelta(milliseconds=deadline_ms),
            budget=TurnBudget(
                max_tokens=max_tokens, deadline_at=now + timedelta(milliseconds=wall_clock_ms)
            ),
        )


class EraseRequest(Event):
    """The user asked to be forgotten. Travels on ``user-messages`` (same key), so each
    agent sees it in order with the user's messages and erases the state it owns."""

    kind: Literal["erase"] = "erase"


class EraseWatermark(BaseModel):
    """Topic ``erasures`` (compacted, keyed by user): the user's latest erase. Every
    consumer drops records of a turn that began before ``erased_at``. ``partition``
    and ``offset`` locate the EraseRequest on ``user-messages``; offsets do not
    survive a memory-only broker's restart, so the filter compares times."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    user_id: str = Field(min_length=1, max_length=128)
    request_id: str = Field(min_length=1, max_length=128)
    erased_at: datetime
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    owners: list[str] = Field(description="services that must confirm the erase")


class EraseConfirmation(BaseModel):
    """Topic ``erase-confirmations`` (keyed by user): one owner of the user's state
    tombstoned it for the erase ``request_id``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    user_id: str = Field(min_length=1, max_length=128)
    request_id: str = Field(min_length=1, max_length=128)
    owner: str = Field(min_length=1, max_length=64)
    confirmed_at: datetime = Field(default_factory=utcnow)


# The services that own per-user state (one compacted topic each) and confirm an erase.
ERASE_OWNERS: tuple[str, ...] = ("shadow", "persona", "stability", "synth")


class SessionEnd(Event):
    """The user closed a session explicitly; its transcript gets compressed."""

    kind: Literal["session_end"] = "session_end"


UserInput = Annotated[UserMessage | EraseRequest | SessionEnd, Field(discriminator="kind")]
UserInputAdapter: TypeAdapter[UserInput] = TypeAdapter(UserInput)


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    llm_calls: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            llm_calls=self.llm_calls + other.llm_calls,
        )


class _AgentResult(Event):
    tier: Tier
    usage: Usage = Field(default_factory=Usage)
    latency_ms: float = Field(ge=0)
    # Set when an LLM loop stopped without success and the deterministic tier answered.
    fallback_reason: str | None = None

    @classmethod
    def for_message(
        cls,
        message: UserMessage,
        payload: Any,
        *,
        started: float,
        tier: Tier = "deterministic",
        usage: Usage | None = None,
        fallback_reason: str | None = None,
    ) -> Self:
        """The result of ``message``; ``started`` is a ``time.perf_counter()`` reading."""
        return cls.model_validate(
            {
                "turn_id": message.turn_id,
                "session_id": message.session_id,
                "user_id": message.user_id,
                "tier": tier,
                "payload": payload,
                "usage": usage or Usage(),
                "latency_ms": (time.perf_counter() - started) * 1000,
                "fallback_reason": fallback_reason,
            }
        )


# v2: the payload's life-domain fields say "domain" (a v1 record's "topic" names still
# read, see the payload models' renames).
DOMAIN_RENAME_VERSION: Literal[2] = 2


class ShadowResult(_AgentResult):
    schema_version: Literal[1, 2] = DOMAIN_RENAME_VERSION  # type: ignore[assignment]
    agent: Literal["shadow"] = "shadow"
    payload: ShadowPayload


class PersonaResult(_AgentResult):
    agent: Literal["persona"] = "persona"
    payload: PersonaPayload


# v2: CommunicationPreferences.register renamed formality (v1 still reads).
PLASTICITY_RESULT_VERSION: Literal[2] = 2


class PlasticityResult(_AgentResult):
    schema_version: Literal[1, 2] = PLASTICITY_RESULT_VERSION  # type: ignore[assignment]
    agent: Literal["plasticity"] = "plasticity"
    payload: PlasticityPayload


class StabilityResult(_AgentResult):
    schema_version: Literal[1, 2] = DOMAIN_RENAME_VERSION  # type: ignore[assignment]
    agent: Literal["stability"] = "stability"
    payload: StabilityPayload


class CoachResult(_AgentResult):
    agent: Literal["coach"] = "coach"
    payload: CoachPayload


AgentResult = Annotated[
    ShadowResult | PersonaResult | PlasticityResult | StabilityResult | CoachResult,
    Field(discriminator="agent"),
]
AgentResultAdapter: TypeAdapter[AgentResult] = TypeAdapter(AgentResult)


# Reply v2 adds the kind ``final_delta``. Only those records are written as v2:
# a reader of v1 refuses them by their version (it skips a reply it cannot read)
# and keeps reading every other reply, finals included, while it is rolled out.
REPLY_DELTA_VERSION: Literal[2] = 2


class Reply(Event):
    """A reply to the user's turn.

    ``coach_delta`` / ``final_delta``: a streamed piece of the Coach's reply / of
    Synth's synthesis. ``seq`` numbers a turn's pieces of one kind from 0; each
    piece carries only its own text (not the text so far), so a record stays the
    size of a sentence however long the reply grows, and the pieces joined in
    ``seq`` order are what the user has been shown. The whole reply always follows
    as one ``coach`` / ``final`` reply and is what a client keeps; a final_delta's
    text is, joined with its predecessors, a prefix of the final's text (pieces
    after the first start with their separating space).
    """

    schema_version: Literal[1, 2] = SCHEMA_VERSION  # type: ignore[assignment]
    kind: Literal["coach", "coach_delta", "final", "final_delta", "human"]
    text: str
    seq: int | None = Field(default=None, ge=0, description="a delta's place in its stream")
    degraded: bool = False
    missing_agents: list[AgentName] = Field(default_factory=list)
    conflicts: list[Conflict] = Field(default_factory=list)
    tier: Tier = "deterministic"
    language: Language = "en"
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="before")
    @classmethod
    def _delta_version(cls, data: Any) -> Any:
        # A final_delta is a v2 record whoever builds it (see REPLY_DELTA_VERSION).
        if isinstance(data, dict) and data.get("kind") == "final_delta":
            data = {"schema_version": REPLY_DELTA_VERSION, **data}
        return data

    @model_validator(mode="after")
    def _degraded_names_missing(self) -> Reply:
        if self.missing_agents and not self.degraded:
            raise ValueError("a reply with missing agents must be marked degraded")
        if self.kind == "final_delta" and (self.seq is None or self.schema_version < 2):
            raise ValueError("a final_delta is a v2 reply with a seq")
        return self


class HumanReviewRequest(Event):
    decision: str = Field(description="the decision kind that escalated, e.g. risk_screen")
    reason: str
    severity: RiskLevel
    excerpt: str = Field(description="the user's message, for the reviewer")


class DeadLetter(BaseModel):
    """A message a consumer could not handle, with the reason and the original bytes.

    Not an :class:`Event`: the original may not even parse, so ids are best-effort.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    created_at: datetime = Field(default_factory=utcnow)
    service: str
    source_topic: str
    partition: int
    offset: int
    key: str | None
    reason: str
    error_type: str
    # The original bytes, base64; cut at ``DLQ_ORIGINAL_MAX`` bytes so that a huge
    # record can still be dead-lettered (the size and digest identify the whole).
    original_b64: str
    original_size: int = 0
    original_sha256: str = ""
    original_truncated: bool = False
    turn_id: str | None = None
    user_id: str | None = None
