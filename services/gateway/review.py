"""Escalated turns waiting for a human, fed from the human-review and replies topics.

Both come from topics, so every gateway replica has the same queue, and a restart
rebuilds it from the topics' recent tail.
"""

from __future__ import annotations

from collections import OrderedDict

from coachbus.contracts import HumanReviewRequest


class ReviewQueue:
    def __init__(self, capacity: int = 5_000) -> None:
        self._pending: OrderedDict[str, HumanReviewRequest] = OrderedDict()
        self._answered: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def add(self, request: HumanReviewRequest) -> None:
        if request.turn_id in self._answered or request.turn_id in self._pending:
            return
        self._pending[request.turn_id] = request
        while len(self._pending) > self._capacity:
            self._pending.popitem(last=False)

    def resolve(self, turn_id: str) -> None:
        self._pending.pop(turn_id, None)
        self._answered[turn_id] = None
        while len(self._answered) > self._capacity:
            self._answered.popitem(last=False)

    def get(self, turn_id: str) -> HumanReviewRequest | None:
        return self._pending.get(turn_id)

    def pending(self) -> list[HumanReviewRequest]:
        return list(self._pending.values())

    def drop_user(self, user_id: str) -> None:
        for turn_id in [t for t, r in self._pending.items() if r.user_id == user_id]:
            del self._pending[turn_id]
