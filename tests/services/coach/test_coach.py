"""Coach: the immediate reply from what is already known."""

from __future__ import annotations

import pytest

from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.safety.screen import screen_crisis
from coachbus.safety.steps import CATALOGUE
from coachbus.text import detect_language, find_markers
from services.coach.logic import quick_reply
from services.shadow.logic import observe
from services.stability.logic import assess
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def test_crisis_gets_resources_at_once_without_any_state() -> None:
    reply = quick_reply(msg("I want to end my life."), None, None)
    assert reply.crisis_mode
    assert "988" in reply.text
    assert "112" in reply.text
    # The screen's measured confidence travels with it (the handler never lets a
    # model rewrite a crisis reply, whatever the number).
    assert reply.confidence == screen_crisis("I want to end my life.").confidence


@pytest.mark.parametrize(
    ("text", "number", "question"),
    [
        ("I just want it all to stop, I can't take it anymore.", "988", "ending your life?"),
        ("ich will einfach nicht mehr, keine kraft mehr", "0800 111 0 111", "das Leben zu nehmen?"),
    ],
)
def test_an_uncertain_screen_gets_a_direct_check_in_at_once(
    text: str, number: str, question: str
) -> None:
    reply = quick_reply(msg(text), None, None)
    assert reply.crisis_mode  # never rewritten by a model
    assert question in reply.text
    assert number in reply.text
    assert "112" not in reply.text  # no more alarm than the text warrants


def test_german_crisis_reply_in_users_register() -> None:
    reply = quick_reply(msg("Ich will nicht mehr leben. Kannst du mir helfen?"), None, None)
    assert reply.crisis_mode
    assert reply.language == "de"
    assert "0800 111 0 111" in reply.text
    assert "112" in reply.text
    assert " du " in reply.text
    assert " Sie " not in reply.text


def test_reply_is_specific_to_the_goal_not_an_echo() -> None:
    text = "I want to write a novel this year, a proper one."
    reply = quick_reply(msg(text), None, None)
    assert "writing" in reply.text
    assert text not in reply.text
    assert reply.text.count("?") == 1


def test_uses_the_blackboard_for_repeated_setbacks() -> None:
    board, _ = observe(None, msg("I want to run twice a week.", turn="t0"))
    board, _ = observe(board, msg("I didn't run at all.", turn="t1"))
    reply = quick_reply(msg("I didn't run again.", turn="t2"), board, None)
    assert "second time" in reply.text
    assert "blackboard" in reply.grounded_on


def test_never_suggests_a_step_blocked_last_turn() -> None:
    safety, _ = assess(
        None, None, msg("Mein Knie tut weh, ich will jeden Tag trainieren.", turn="t0")
    )
    reply = quick_reply(
        msg("Wie soll ich jetzt weitermachen mit dem Training?", turn="t1"), None, safety
    )
    assert "train_through_injury" in reply.avoided_steps
    assert find_markers(reply.text, CATALOGUE["train_through_injury"].markers) == []


def test_risky_plan_gets_a_safer_first_step() -> None:
    reply = quick_reply(msg("I'll quit my job tomorrow and put all my savings in."), None, None)
    assert not reply.crisis_mode
    assert "safety net" in reply.text or "income" in reply.text
    markers = CATALOGUE["quit_job_abruptly"].markers + CATALOGUE["all_savings"].markers
    assert find_markers(reply.text, list(markers)) == []


def test_after_a_crisis_the_next_turn_is_a_check_in() -> None:
    safety, _ = assess(None, None, msg("I want to kill myself.", turn="t0"))
    reply = quick_reply(
        msg("I talked to my sister, she is here with me now.", turn="t1"), None, safety
    )
    assert reply.crisis_mode
    assert "How are you" in reply.text


def test_a_sudden_calm_right_after_a_crisis_is_asked_about_directly() -> None:
    # "I'm calmer now" right after "I want to kill myself" is how a decided person
    # may sound too; the learned reader reads it as risk, and the reply asks the
    # direct question rather than assuming the calm (the protective reading).
    safety, _ = assess(None, None, msg("I want to kill myself.", turn="t0"))
    reply = quick_reply(msg("I'm a bit calmer now.", turn="t1"), None, safety)
    assert reply.crisis_mode
    assert "ending your life" in reply.text


def test_short_german_message_keeps_known_language_and_register() -> None:
    # The language is the message's (decided at the gateway, which knew the
    # conversation was German); du/Sie the user's remembered one on the board.
    board = Blackboard(user_id="u1", formality="informal")
    reply = quick_reply(msg("Okay.", earlier="de"), board, SafetyState(user_id="u1"))
    assert reply.language == "de"
    assert detect_language(reply.text) == "de"
    assert " Sie " not in reply.text


def test_replies_vary_across_turns() -> None:
    texts = {
        quick_reply(msg("I ran today, it went well.", turn=f"t{i}"), None, None).text
        for i in range(12)
    }
    assert len(texts) > 1


def test_a_burden_crisis_reply_asks_about_suicidal_thoughts_as_stability_records() -> None:
    # The C-SSRS ladder: after "better off without me" the reply asks the direct
    # question, not "are you safe right now?"; Stability's screen of the same turn
    # carries that rung (Synth renders from it, the state opens that question).
    from coachbus.contracts.payloads import CrisisCategory

    text = "Honestly everyone would be better off without me."
    reply = quick_reply(msg(text), None, None)
    assert reply.crisis_mode and reply.crisis is not None
    assert reply.crisis.category is CrisisCategory.SUICIDAL_IDEATION
    assert "thoughts of ending your life?" in reply.text
    assert "safe right now" not in reply.text
    assert "988" in reply.text
    state, frame = assess(None, None, msg(text))
    assert frame.crisis.asks == "suicide"
    assert state.open_check_in is not None and state.open_check_in.question == "suicide"
