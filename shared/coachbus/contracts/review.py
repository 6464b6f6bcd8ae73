"""Human review on the bus: what reviewers do with an escalated turn, and its audit.

Topic ``review-actions`` (delete, keyed by the item: the escalated turn's id) holds
every claim, renewal, release, answer and close, as the gateway replica that took
the request published it. Keyed by the item, so all actions on one item sit in one
partition in one order, and every replica folds them into the same state: the first
valid claim in that order wins, and an answer or a close counts only from the
holder of the claim at that point of the log (``services/gateway/review_ledger.py``).

Topic ``review-audit`` (delete, its own retention) holds one event per action with
its verdict: who did what to which item, and when. It never holds the person's
words, user id or session id, nor a reviewer's note or answer text, so an erase
leaves nothing in it that points at the person; the erase adds an ``erased`` event
per item, and readers then show only that the item existed and was erased.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from coachbus.contracts.events import SCHEMA_VERSION, utcnow
from coachbus.contracts.payloads import Language

# Who acts when no reviewer does (the webhook's notification).
SYSTEM_ACTOR = "coachbus"
ANSWER_MAX_CHARS = 8_000
NOTE_MAX_CHARS = 2_000

ActionKind = Literal["claim", "renew", "release", "answer", "close", "notify"]
AuditKind = Literal["claim", "renew", "release", "answer", "close", "notify", "erased"]


def new_action_id() -> str:
    return uuid.uuid4().hex


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    action_id: str = Field(default_factory=new_action_id, min_length=1, max_length=64)
    item_id: str = Field(min_length=1, max_length=128, description="the escalated turn's id")
    # The person the item is about: an erase of theirs drops the action (and its
    # answer text) on every replica. Never copied into the audit.
    user_id: str = Field(min_length=1, max_length=128)
    session_id: str = Field(min_length=1, max_length=128)
    reviewer_id: str = Field(min_length=1, max_length=128)
    replica: str = Field(
        min_length=1,
        max_length=64,
        description="the gateway instance that published it: it answers the reviewer "
        "and publishes what an accepted action leads to",
    )
    at: datetime = Field(default_factory=utcnow)


class ClaimAction(_Action):
    action: Literal["claim"] = "claim"
    expires_at: datetime = Field(description="the claim lapses then unless renewed")


class RenewAction(_Action):
    action: Literal["renew"] = "renew"
    expires_at: datetime


class ReleaseAction(_Action):
    action: Literal["release"] = "release"


class AnswerAction(_Action):
    """Words for the person, sent as a ``human`` reply once the fold accepts them."""

    action: Literal["answer"] = "answer"
    text: str = Field(min_length=1, max_length=ANSWER_MAX_CHARS)
    template: str | None = Field(default=None, max_length=64)
    language: Language = "en"
    # Answering is working on it: the claim is extended to this.
    expires_at: datetime


class CloseAction(_Action):
    action: Literal["close"] = "close"
    outcome: str = Field(min_length=1, max_length=64, description="an id of review.toml")
    note: str = Field(default="", max_length=NOTE_MAX_CHARS)


class NotifyAction(_Action):
    """A replica offers to call the webhook for a new item; the first offer in log
    order wins, so one call is made however many replicas saw the item."""

    action: Literal["notify"] = "notify"


ReviewAction = Annotated[
    ClaimAction | RenewAction | ReleaseAction | AnswerAction | CloseAction | NotifyAction,
    Field(discriminator="action"),
]
ReviewActionAdapter: TypeAdapter[ReviewAction] = TypeAdapter(ReviewAction)


class ReviewAuditEvent(BaseModel):
    """Topic ``review-audit``: one action and its verdict (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    audit_id: str = Field(min_length=1, max_length=160, description="the action's id")
    item_id: str = Field(min_length=1, max_length=128)
    reviewer_id: str = Field(min_length=1, max_length=128)
    action: AuditKind
    at: datetime = Field(description="when the action was taken")
    accepted: bool
    reason: str | None = Field(default=None, max_length=200, description="why it was refused")
    outcome: str | None = Field(default=None, max_length=64)
    template: str | None = Field(default=None, max_length=64)
    recorded_at: datetime = Field(default_factory=utcnow)
