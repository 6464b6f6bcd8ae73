"""The fold of review-actions: claim races, lapses, answers by non-holders, erase."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coachbus.contracts import (
    AnswerAction,
    ClaimAction,
    CloseAction,
    NotifyAction,
    ReleaseAction,
    RenewAction,
    new_turn_id,
)
from services.gateway.review_ledger import ReviewLedger, Verdict

pytestmark = pytest.mark.unit

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TTL = timedelta(minutes=10)
ITEM = "item-1"


def _ids(replica: str, reviewer: str, at: datetime, item: str = ITEM) -> dict[str, object]:
    return {
        "item_id": item,
        "user_id": "u",
        "session_id": "s",
        "reviewer_id": reviewer,
        "replica": replica,
        "at": at,
    }


def claim(reviewer: str, at: datetime = T0, replica: str = "r1", item: str = ITEM) -> ClaimAction:
    return ClaimAction(**_ids(replica, reviewer, at, item), expires_at=at + TTL)  # type: ignore[arg-type]


def renew(reviewer: str, at: datetime) -> RenewAction:
    return RenewAction(**_ids("r1", reviewer, at), expires_at=at + TTL)  # type: ignore[arg-type]


def release(reviewer: str, at: datetime) -> ReleaseAction:
    return ReleaseAction(**_ids("r1", reviewer, at))  # type: ignore[arg-type]


def answer(reviewer: str, at: datetime, text: str = "I'm here.") -> AnswerAction:
    return AnswerAction(**_ids("r1", reviewer, at), expires_at=at + TTL, text=text)  # type: ignore[arg-type]


def close(reviewer: str, at: datetime, outcome: str = "false_alarm") -> CloseAction:
    return CloseAction(**_ids("r1", reviewer, at), outcome=outcome, note="n")  # type: ignore[arg-type]


def test_the_first_claim_in_log_order_wins_whatever_the_replicas() -> None:
    # Two replicas took two claims a millisecond apart; the log holds carol's first.
    # Every replica folds the same log and agrees, even on the clocks' order.
    log = [claim("carol", T0 + timedelta(milliseconds=5), "r2"), claim("rita", T0, "r1")]
    for _replica in range(2):
        ledger = ReviewLedger()
        verdicts = [ledger.fold(a) for a in log]
        assert [v.accepted for v in verdicts] == [True, False]
        assert verdicts[1].reason == "claimed by carol"
        state = ledger.get(ITEM)
        assert state is not None and state.holder == "carol"


def test_an_answer_whose_claim_lost_is_refused() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    # rita's replica had not seen carol's claim yet and sent claim + answer at once.
    assert not ledger.fold(claim("rita", T0 + timedelta(seconds=1))).accepted
    refused = ledger.fold(answer("rita", T0 + timedelta(seconds=1)))
    assert refused == Verdict(False, "claimed by carol")
    state = ledger.get(ITEM)
    assert state is not None and state.answers == []
    assert ledger.fold(answer("carol", T0 + timedelta(seconds=2))).accepted
    assert [a.reviewer_id for a in state.answers] == ["carol"]


def test_an_answer_or_close_without_a_claim_is_refused() -> None:
    ledger = ReviewLedger()
    assert ledger.fold(answer("carol", T0)).reason == "not claimed: claim the item first"
    assert ledger.fold(close("carol", T0)).reason == "not claimed: claim the item first"
    assert ledger.fold(release("carol", T0)).accepted is False


def test_a_claim_lapses_unless_renewed() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    # Renewed at 9 minutes: good until 19.
    assert ledger.fold(renew("carol", T0 + timedelta(minutes=9))).accepted
    assert not ledger.fold(claim("rita", T0 + timedelta(minutes=15))).accepted
    # Lapsed at 19: carol may no longer answer, and rita may claim.
    late = ledger.fold(answer("carol", T0 + timedelta(minutes=20)))
    assert late == Verdict(False, "the claim lapsed: claim the item again")
    assert ledger.fold(claim("rita", T0 + timedelta(minutes=20))).accepted
    state = ledger.get(ITEM)
    assert state is not None and state.holder == "rita"
    assert state.claimed_at == T0 + timedelta(minutes=20)
    assert ledger.fold(renew("carol", T0 + timedelta(minutes=21))).reason == "claimed by rita"


def test_a_holder_renewing_after_the_lapse_claims_afresh_if_nobody_else_did() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    assert ledger.fold(renew("carol", T0 + timedelta(minutes=30))).accepted
    state = ledger.get(ITEM)
    assert state is not None and state.claimed_at == T0 + timedelta(minutes=30)
    assert state.holder_at(T0 + timedelta(minutes=39)) == "carol"


def test_answering_extends_the_claim() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    assert ledger.fold(answer("carol", T0 + timedelta(minutes=8))).accepted
    state = ledger.get(ITEM)
    assert state is not None and state.holder_at(T0 + timedelta(minutes=17)) == "carol"


def test_release_gives_the_item_back() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    assert not ledger.fold(release("rita", T0 + timedelta(seconds=1))).accepted
    assert ledger.fold(release("carol", T0 + timedelta(seconds=2))).accepted
    assert ledger.fold(claim("rita", T0 + timedelta(seconds=3))).accepted


def test_close_ends_the_item_for_everyone() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    assert not ledger.fold(close("rita", T0 + timedelta(seconds=1))).accepted
    assert ledger.fold(close("carol", T0 + timedelta(seconds=2), "emergency_services")).accepted
    state = ledger.get(ITEM)
    assert state is not None and state.closed is not None
    assert state.closed.outcome == "emergency_services"
    for late in (claim("rita", T0 + timedelta(minutes=1)), answer("carol", T0 + timedelta(1))):
        assert ledger.fold(late) == Verdict(False, "closed by carol")


def test_a_redelivered_action_changes_nothing() -> None:
    ledger = ReviewLedger()
    first = claim("carol")
    assert ledger.fold(first).first_action
    again = ledger.fold(first)
    assert again.duplicate and not again.accepted
    state = ledger.get(ITEM)
    assert state is not None and len(state.history) == 1


def test_the_first_human_action_is_marked_once_and_a_notice_is_not_one() -> None:
    ledger = ReviewLedger()
    notice = NotifyAction(**_ids("r1", "coachbus", T0))  # type: ignore[arg-type]
    assert ledger.fold(notice) == Verdict(True)
    second = NotifyAction(**_ids("r2", "coachbus", T0))  # type: ignore[arg-type]
    assert ledger.fold(second) == Verdict(False, "already notified")
    state = ledger.get(ITEM)
    assert state is not None and state.notifier == "r1"
    assert ledger.fold(claim("carol")).first_action
    assert not ledger.fold(answer("carol", T0 + timedelta(seconds=1))).first_action


def test_the_history_holds_every_verdict_and_no_words() -> None:
    ledger = ReviewLedger()
    ledger.fold(claim("carol"))
    ledger.fold(claim("rita", T0 + timedelta(seconds=1)))
    ledger.fold(answer("carol", T0 + timedelta(seconds=2), text="secret words"))
    state = ledger.get(ITEM)
    assert state is not None
    assert [(e.action, e.reviewer_id, e.accepted) for e in state.history] == [
        ("claim", "carol", True),
        ("claim", "rita", False),
        ("answer", "carol", True),
    ]
    assert "secret words" not in repr(state.history)


def test_erase_forgets_the_persons_items_and_refuses_their_late_actions() -> None:
    ledger = ReviewLedger()
    old_item, new_item = new_turn_id(), "later"
    ledger.fold(claim("carol", item=old_item))
    ledger.fold(claim("carol", item=new_item))
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    # Only items of turns begun before the watermark go; an id whose start cannot be
    # told goes too (keeping it could keep erased words).
    assert ledger.drop_user("u", before=cutoff) == sorted([old_item, new_item])
    assert ledger.get(old_item) is None and len(ledger) == 0
    late = ledger.fold(claim("rita", T0 + timedelta(hours=1), item=old_item))
    assert late == Verdict(False, "erased")


def test_the_ledger_is_bounded_and_forgets_closed_items_first() -> None:
    ledger = ReviewLedger(capacity=2)
    ledger.fold(claim("carol", item="a"))
    ledger.fold(claim("carol", item="b"))
    ledger.fold(close("carol", T0 + timedelta(seconds=1)).model_copy(update={"item_id": "b"}))
    ledger.fold(claim("carol", item="c"))
    assert ledger.get("a") is not None
    assert ledger.get("b") is None
    assert ledger.get("c") is not None
