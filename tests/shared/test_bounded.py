"""The bounded "already answered" set (coachbus.bounded)."""

from __future__ import annotations

import pytest

from coachbus.bounded import BoundedSet

pytestmark = pytest.mark.unit


def test_keeps_at_most_capacity_forgetting_the_oldest_first() -> None:
    seen: BoundedSet[str] = BoundedSet(2)
    for turn in ("t1", "t2", "t3"):
        seen.add(turn)
    assert "t1" not in seen
    assert ("t2" in seen, "t3" in seen, len(seen)) == (True, True, 2)
    assert list(seen) == ["t2", "t3"]


def test_a_member_added_again_becomes_the_newest() -> None:
    seen: BoundedSet[str] = BoundedSet(2)
    seen.add("t1")
    seen.add("t2")
    seen.add("t1")  # a redelivery of t1: it is recent again
    seen.add("t3")
    assert list(seen) == ["t1", "t3"]


def test_discard_and_a_capacity_below_one() -> None:
    seen: BoundedSet[str] = BoundedSet(3)
    seen.add("t1")
    seen.discard("t1")
    seen.discard("never-added")
    assert len(seen) == 0
    with pytest.raises(ValueError, match="capacity"):
        BoundedSet[str](0)
