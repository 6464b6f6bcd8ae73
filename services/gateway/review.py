"""Escalated turns waiting for a human, fed from the human-review and replies topics.

Both come from topics, so every gateway replica has the same queue, and a restart
rebuilds it from the topics' recent tail.

What the queue may drop is decided per user, never across users: one person who
sends thousands of crisis-pattern messages (or a script using their key) must not
push anyone else's unanswered crisis out of a reviewer's sight. Each user holds at
most ``per_user`` open items; past that their oldest, least severe item goes and
is counted, so the reviewer still sees how many more that person sent. Across
users only low and moderate items are ever evicted (oldest first); high and
critical items stay until a human answers them or the user erases their data.
The queue's size is therefore bounded by users × ``per_user``, and users are
bounded by the keys the gateway accepts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from coachbus.bounded import BoundedSet
from coachbus.contracts import HumanReviewRequest, turn_started_at
from coachbus.safety.severity import SEVERITY_RANK

# High and critical items are never evicted to make room for other users.
_KEEP_FROM = SEVERITY_RANK["high"]


@dataclass(slots=True)
class _UserItems:
    # turn id -> request, oldest first
    items: OrderedDict[str, HumanReviewRequest] = field(default_factory=OrderedDict)
    # open items of this user that were dropped for the per-user cap
    collapsed: int = 0


class ReviewQueue:
    def __init__(self, capacity: int = 5_000, per_user: int = 20) -> None:
        self._pending: OrderedDict[str, HumanReviewRequest] = OrderedDict()
        self._users: dict[str, _UserItems] = {}
        # Turns a human answered: a redelivered review record of one is not queued
        # again (bounded like the queue; the oldest answers are forgotten first).
        self._answered: BoundedSet[str] = BoundedSet(capacity)
        self._capacity = capacity
        self._per_user = per_user

    def add(self, request: HumanReviewRequest) -> bool:
        """Queue one request; a turn already queued or answered is not queued again
        (a redelivered review record is the same review). True if it is new."""
        if request.turn_id in self._answered or request.turn_id in self._pending:
            return False
        self._pending[request.turn_id] = request
        user = self._users.setdefault(request.user_id, _UserItems())
        user.items[request.turn_id] = request
        if len(user.items) > self._per_user:
            self._drop(_least_urgent(user.items))
            user.collapsed += 1
        while len(self._pending) > self._capacity:
            victim = next(
                (t for t, r in self._pending.items() if SEVERITY_RANK[r.severity] < _KEEP_FROM),
                None,
            )
            if victim is None:
                break  # only high/critical left: bounded by users x per_user
            self._drop(victim)
        return request.turn_id in self._pending

    def _drop(self, turn_id: str) -> None:
        request = self._pending.pop(turn_id, None)
        if request is None:
            return
        user = self._users.get(request.user_id)
        if user is not None:
            user.items.pop(turn_id, None)
            if not user.items:
                del self._users[request.user_id]

    def resolve(self, turn_id: str) -> None:
        self._drop(turn_id)
        self._answered.add(turn_id)

    def get(self, turn_id: str) -> HumanReviewRequest | None:
        return self._pending.get(turn_id)

    def pending(self) -> list[HumanReviewRequest]:
        """Open items, most severe first, then the longest waiting first."""
        return sorted(
            self._pending.values(), key=lambda r: (-SEVERITY_RANK[r.severity], r.created_at)
        )

    def items_of(self, user_id: str) -> list[str]:
        user = self._users.get(user_id)
        return list(user.items) if user is not None else []

    def collapsed(self, user_id: str) -> int:
        """Open items of this user dropped for the per-user cap."""
        user = self._users.get(user_id)
        return user.collapsed if user is not None else 0

    def drop_user(self, user_id: str, before: datetime | None = None) -> None:
        """Forget the user's open items (erase); with ``before``, only those of turns
        begun before it, so a watermark that reaches a replica late spares newer ones."""
        user = self._users.get(user_id)
        if user is None:
            return
        for turn_id, request in list(user.items.items()):
            if before is None or erased_before(request, before):
                self._drop(turn_id)
        if user_id in self._users and before is None:
            del self._users[user_id]
        if user_id not in self._users:
            return
        # Items of newer turns stay; the folded count was about the erased ones.
        self._users[user_id].collapsed = 0


def erased_before(request: HumanReviewRequest, cutoff: datetime) -> bool:
    """Whether the review's turn began before ``cutoff`` (a user's erase)."""
    started = turn_started_at(request.turn_id) or request.created_at
    return started < cutoff


def _least_urgent(items: OrderedDict[str, HumanReviewRequest]) -> str:
    """The oldest of the least severe items (dict order is arrival order)."""
    return min(items, key=lambda t: SEVERITY_RANK[items[t].severity])
