"""The review queue: one user's flood never evicts another user's open crisis."""

from __future__ import annotations

import pytest

from coachbus.contracts import HumanReviewRequest
from services.gateway.review import ReviewQueue

pytestmark = pytest.mark.unit


def _req(user: str, turn: str, severity: str = "critical") -> HumanReviewRequest:
    return HumanReviewRequest.model_validate(
        {
            "turn_id": turn,
            "session_id": "s",
            "user_id": user,
            "decision": "risk_screen",
            "reason": "test",
            "severity": severity,
            "excerpt": "x",
        }
    )


def test_one_users_flood_keeps_everyone_elses_items() -> None:
    q = ReviewQueue(capacity=100, per_user=10)
    q.add(_req("alice", "a-1", "high"))
    q.add(_req("bob", "b-1", "moderate"))
    for i in range(5_000):
        q.add(_req("mallory", f"m-{i}"))
    pending = q.pending()
    assert {r.turn_id for r in pending if r.user_id != "mallory"} == {"a-1", "b-1"}
    flood = [r.turn_id for r in pending if r.user_id == "mallory"]
    assert len(flood) == 10
    assert flood == [f"m-{i}" for i in range(4_990, 5_000)]  # the newest stay
    assert q.collapsed("mallory") == 4_990
    assert q.collapsed("alice") == 0


def test_per_user_cap_drops_the_least_severe_first() -> None:
    q = ReviewQueue(per_user=2)
    q.add(_req("u", "t-1", "critical"))
    q.add(_req("u", "t-2", "moderate"))
    q.add(_req("u", "t-3", "high"))
    assert [r.turn_id for r in q.pending()] == ["t-1", "t-3"]


def test_global_capacity_evicts_only_low_and_moderate() -> None:
    q = ReviewQueue(capacity=3, per_user=5)
    q.add(_req("a", "1", "moderate"))
    q.add(_req("b", "2", "critical"))
    q.add(_req("c", "3", "high"))
    q.add(_req("d", "4", "high"))
    q.add(_req("e", "5", "critical"))
    assert {r.turn_id for r in q.pending()} == {"2", "3", "4", "5"}
    assert [r.severity for r in q.pending()][:2] == ["critical", "critical"]


def test_a_review_is_queued_once_and_stays_answered() -> None:
    q = ReviewQueue()
    q.add(_req("u", "t"))
    q.add(_req("u", "t"))
    assert len(q.pending()) == 1
    q.resolve("t")
    q.add(_req("u", "t"))  # a redelivered record after the answer
    assert q.pending() == []


def test_drop_user_forgets_their_items_only() -> None:
    q = ReviewQueue()
    q.add(_req("u", "1"))
    q.add(_req("v", "2"))
    q.drop_user("u")
    assert [r.turn_id for r in q.pending()] == ["2"]
    assert q.collapsed("u") == 0
