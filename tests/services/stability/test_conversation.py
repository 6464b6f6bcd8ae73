"""Stability reads each message in its conversation, with the same code the eval
replays (`coachbus eval crisis --conversations` scores what the service does)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from coachbus.contracts.events import TurnBudget, UserMessage
from coachbus.contracts.payloads import CrisisCategory
from coachbus.contracts.state import SafetyState
from evaluation import conversations as conv
from services.coach.logic import quick_reply
from services.stability.logic import assess
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def _message(item: conv.Conversation, i: int, text: str, at: object) -> UserMessage:
    base = msg(text, turn=f"{item.item_id}-t{i + 1}", user=item.item_id)
    return base.model_copy(
        update={
            "created_at": at,
            "deadline_at": at + timedelta(seconds=30),  # type: ignore[operator]
            "budget": TurnBudget(max_tokens=1000, deadline_at=at + timedelta(seconds=30)),  # type: ignore[operator]
        }
    )


def _agree(items: list[conv.Conversation]) -> None:
    for item in items:
        state: SafetyState | None = None
        now = conv._START
        for i, (text, gap) in enumerate(item.user_turns):
            now += gap
            state, payload = assess(state, None, _message(item, i, text, now))
        replayed = conv.replay(item)
        assert payload.crisis == replayed.screen, item.item_id
        assert payload.answered_check_in == replayed.reading.answered, item.item_id


def test_stability_and_the_eval_replay_agree_on_a_quarter_of_the_dev_turns() -> None:
    # Every fourth dev conversation, all of its turns: every round and category is in
    # it (the corpus is written round by round, categories interleaved).
    items = conv.load("dev")[::4]
    assert len(items) >= 200
    _agree(items)


@pytest.mark.heavy
def test_stability_and_the_eval_replay_agree_on_every_dev_turn() -> None:
    # All of them (12 s of the suite's 6 min): CI runs it with `make test-heavy`.
    items = conv.load("dev")
    assert len(items) >= 800
    _agree(items)


def test_ja_to_our_check_in_gets_the_crisis_reply_from_coach_and_stability() -> None:
    state, first = assess(None, None, msg("Ich will einfach nicht mehr.", turn="a"))
    assert first.crisis.uncertain and first.overall == "moderate"
    answer = msg("ja", turn="b", earlier="de")
    coach = quick_reply(answer, None, state)
    assert coach.crisis_mode and coach.crisis is not None
    assert coach.crisis.category is CrisisCategory.SUICIDAL_IDEATION
    assert "0800 111 0 111" in coach.text  # the help line, not a coaching question
    _, second = assess(state, None, answer)
    assert second.crisis.category is CrisisCategory.SUICIDAL_IDEATION
    assert second.answered_check_in == "affirmed"
    assert second.overall in ("high", "critical")


def test_a_no_gets_a_caring_turn_not_coaching() -> None:
    state, _ = assess(None, None, msg("I just want it all to stop.", turn="a"))
    answer = msg("no, I just meant the move wore me out", turn="b")
    coach = quick_reply(answer, None, state)
    assert not (coach.crisis and coach.crisis.category is not CrisisCategory.NONE)
    assert "Thank you for answering" in coach.text
    _, payload = assess(state, None, answer)
    assert payload.answered_check_in == "denied"
    assert payload.crisis.category is CrisisCategory.NONE and not payload.crisis.uncertain
