"""The fold of ``review-actions``: who holds each item, what was answered, how it closed.

Every gateway replica reads every action in the log's order (one item's actions
share a partition: they are keyed by the item) and folds them here, so every
replica reaches the same verdict on every action, whichever replica published it
and however two reviewers raced:

* a claim is valid when nobody holds the item at the claim's time (never claimed,
  released, closed, or the holder's claim lapsed) or its holder claims again: the
  first valid claim in log order wins, a later one by someone else is refused;
* a renewal or a release counts only from the holder;
* an answer or a close counts only from the holder whose claim has not lapsed at
  the action's time, so an answer whose claim lost a race is refused here, on
  every replica alike, and no reply reaches the person for it;
* an item closed stays closed.

Times are the actions' own (``at``, ``expires_at``): set by the replica that took
the request, carried in the record, so the fold never reads a clock and a replica
re-reading the log after a restart reaches the same state.

Bounded: at most ``capacity`` items (the oldest closed ones go first), each with at
most ``history`` entries of its audit history.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from coachbus.bounded import BoundedSet
from coachbus.contracts import (
    AnswerAction,
    ClaimAction,
    CloseAction,
    NotifyAction,
    ReleaseAction,
    RenewAction,
    ReviewAction,
    turn_started_at,
)
from coachbus.contracts.review import AuditKind


@dataclass(frozen=True, slots=True)
class Verdict:
    accepted: bool
    reason: str | None = None
    # The action id was folded before (a redelivery): nothing changed.
    duplicate: bool = False
    # The first human action on the item (for the time-to-first-action histogram).
    first_action: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    answer_id: str
    reviewer_id: str
    at: datetime
    text: str
    template: str | None


@dataclass(frozen=True, slots=True)
class Closing:
    reviewer_id: str
    at: datetime
    outcome: str
    note: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One action as the audit sees it: no text, no note."""

    action_id: str
    action: AuditKind
    reviewer_id: str
    at: datetime
    accepted: bool
    reason: str | None = None
    outcome: str | None = None
    template: str | None = None

    @classmethod
    def of(cls, action: ReviewAction, verdict: Verdict) -> Entry:
        """What the audit keeps of an action and its verdict (the history shows it, the
        review-audit topic carries it)."""
        return cls(
            action_id=action.action_id,
            action=action.action,
            reviewer_id=action.reviewer_id,
            at=action.at,
            accepted=verdict.accepted,
            reason=verdict.reason,
            outcome=action.outcome if isinstance(action, CloseAction) else None,
            template=action.template if isinstance(action, AnswerAction) else None,
        )


@dataclass(slots=True)
class ItemState:
    item_id: str
    user_id: str
    session_id: str
    holder: str | None = None
    claimed_at: datetime | None = None
    expires_at: datetime | None = None
    answers: list[Answer] = field(default_factory=list)
    closed: Closing | None = None
    first_action_at: datetime | None = None
    # The replica whose webhook offer won (see NotifyAction).
    notifier: str | None = None
    history: list[Entry] = field(default_factory=list)

    def holder_at(self, when: datetime) -> str | None:
        """Who holds the item at ``when``: nobody once the claim lapsed."""
        if self.holder is None or self.expires_at is None or when > self.expires_at:
            return None
        return self.holder


class ReviewLedger:
    def __init__(self, capacity: int = 20_000, history: int = 200) -> None:
        self._items: OrderedDict[str, ItemState] = OrderedDict()
        self._users: dict[str, set[str]] = {}
        self._seen: BoundedSet[str] = BoundedSet(capacity * 4)
        # Items of an erased person: a late or re-read action of theirs stays out.
        self._erased: BoundedSet[str] = BoundedSet(capacity)
        self._capacity = capacity
        self._history = history

    def get(self, item_id: str) -> ItemState | None:
        return self._items.get(item_id)

    def __len__(self) -> int:
        return len(self._items)

    def erased(self, item_id: str) -> bool:
        return item_id in self._erased

    # ------------------------------------------------------------------ the fold

    def fold(self, action: ReviewAction) -> Verdict:
        if action.action_id in self._seen:
            return Verdict(False, "already folded", duplicate=True)
        self._seen.add(action.action_id)
        if action.item_id in self._erased:
            return Verdict(False, "erased")
        state = self._state(action)
        verdict = self._judge(state, action)
        human = not isinstance(action, NotifyAction)
        if verdict.accepted and human and state.first_action_at is None:
            state.first_action_at = action.at
            verdict = Verdict(True, first_action=True)
        if not human and not verdict.accepted:
            return verdict  # the other replicas' offers: no one's action, nothing to keep
        state.history.append(Entry.of(action, verdict))
        del state.history[: -self._history]
        return verdict

    def _judge(self, state: ItemState, action: ReviewAction) -> Verdict:
        if state.closed is not None:
            return Verdict(False, f"closed by {state.closed.reviewer_id}")
        if isinstance(action, NotifyAction):
            if state.notifier is not None:
                return Verdict(False, "already notified")
            state.notifier = action.replica
            return Verdict(True)
        who = action.reviewer_id
        current = state.holder_at(action.at)
        if isinstance(action, ClaimAction):
            if current is not None and current != who:
                return Verdict(False, f"claimed by {current}")
            if current is None:
                state.claimed_at = action.at
            state.holder, state.expires_at = who, action.expires_at
            return Verdict(True)
        if isinstance(action, RenewAction | ReleaseAction):
            # The holder's latest claim, lapsed or not: nobody else claimed since.
            if state.holder != who:
                return self._refused(state, action.at)
            if isinstance(action, ReleaseAction):
                state.holder = state.claimed_at = state.expires_at = None
                return Verdict(True)
            if current is None:
                state.claimed_at = action.at  # renewed after it lapsed: a new claim
            state.expires_at = action.expires_at
            return Verdict(True)
        if current != who:
            return self._refused(state, action.at)
        if isinstance(action, AnswerAction):
            state.answers.append(
                Answer(action.action_id, who, action.at, action.text, action.template)
            )
            state.expires_at = max(action.expires_at, state.expires_at or action.expires_at)
            return Verdict(True)
        state.closed = Closing(who, action.at, action.outcome, action.note)
        state.holder = state.claimed_at = state.expires_at = None
        return Verdict(True)

    @staticmethod
    def _refused(state: ItemState, at: datetime) -> Verdict:
        current = state.holder_at(at)
        if current is not None:
            return Verdict(False, f"claimed by {current}")
        if state.holder is not None:
            return Verdict(False, "the claim lapsed: claim the item again")
        return Verdict(False, "not claimed: claim the item first")

    def _state(self, action: ReviewAction) -> ItemState:
        state = self._items.get(action.item_id)
        if state is None:
            state = ItemState(action.item_id, action.user_id, action.session_id)
            self._items[action.item_id] = state
            self._users.setdefault(action.user_id, set()).add(action.item_id)
            self._evict()
        return state

    def _evict(self) -> None:
        while len(self._items) > self._capacity:
            victim = next((i for i, s in self._items.items() if s.closed is not None), None)
            self._forget(victim if victim is not None else next(iter(self._items)))

    def _forget(self, item_id: str) -> None:
        state = self._items.pop(item_id, None)
        if state is None:
            return
        items = self._users.get(state.user_id)
        if items is not None:
            items.discard(item_id)
            if not items:
                del self._users[state.user_id]

    # ------------------------------------------------------------------ erasure

    def items_of(self, user_id: str, before: datetime | None = None) -> list[str]:
        """The user's items (of turns begun before ``before``, if given)."""
        return sorted(
            i for i in self._users.get(user_id, ()) if before is None or began_before(i, before)
        )

    def drop_user(self, user_id: str, before: datetime | None = None) -> list[str]:
        """Forget the user's items (answers included) and refuse their actions from now
        on; with ``before``, only items of turns begun before it."""
        gone = self.items_of(user_id, before)
        for item_id in gone:
            self._forget(item_id)
            self._erased.add(item_id)
        return gone

    def mark_erased(self, item_ids: list[str]) -> None:
        for item_id in item_ids:
            self._forget(item_id)
            self._erased.add(item_id)


def began_before(item_id: str, cutoff: datetime) -> bool:
    # An item whose start cannot be told goes: keeping it could keep erased words.
    started = turn_started_at(item_id)
    return started is None or started < cutoff
