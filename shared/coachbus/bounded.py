"""A bounded set that forgets its oldest members: the one home of the "already
answered" memories (Synth's join keeps the turns it finalised in one, the gateway's
review queue the reviews a human answered).

Such a memory must be bounded (it lives as long as the process and sees every turn)
and must forget the *oldest* first: a redelivery or a late record concerns a recent
turn, so the recent ones are what it has to know. Adding a member again makes it the
newest, so a turn seen again is kept as long as a new one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class BoundedSet(Generic[K]):
    """At most ``capacity`` members; past it, the least recently added go first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self._members: OrderedDict[K, None] = OrderedDict()
        self.capacity = capacity

    def __contains__(self, member: object) -> bool:
        return member in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[K]:
        """Oldest first."""
        return iter(self._members)

    def add(self, member: K) -> None:
        self._members[member] = None
        self._members.move_to_end(member)
        while len(self._members) > self.capacity:
            self._members.popitem(last=False)

    def discard(self, member: K) -> None:
        self._members.pop(member, None)


__all__ = ["BoundedSet"]
