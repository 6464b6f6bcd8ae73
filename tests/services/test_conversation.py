"""The scripted multi-session conversation, replayed through the pure functions.

These are the issue's "done when" properties for the deterministic tier.
"""

from __future__ import annotations

import re

import pytest

from coachbus.contracts.payloads import CrisisCategory
from coachbus.safety.helplines import SHIPPED
from coachbus.safety.steps import CATALOGUE
from coachbus.text import detect_language, find_markers
from tests.fixtures.conversation import CONVERSATION, USERS, sessions_of, turns_for
from tests.fixtures.replay import Step, replay

pytestmark = pytest.mark.unit

_DU = re.compile(r"\b(?:du|dich|dir|dein\w*)\b", re.I)
_SIE_MID = re.compile(r"(?<=[a-zäöüß,] )(?:Sie|Ihnen|Ihr\w*)\b")


@pytest.fixture(scope="module")
def steps() -> dict[str, list[Step]]:
    return {u: replay(u) for u in USERS}


def _all(steps: dict[str, list[Step]]) -> list[Step]:
    return [s for u in USERS for s in steps[u]]


def test_fixture_shape() -> None:
    assert len(CONVERSATION) >= 30
    assert sum(len(sessions_of(u)) >= 3 for u in USERS) >= 2
    assert {t.language for t in CONVERSATION} == {"en", "de"}
    assert {t.register for t in CONVERSATION if t.language == "de"} == {"informal", "formal"}
    assert len({t.turn_id for t in CONVERSATION}) == len(CONVERSATION)
    assert any("crisis" in t.tags for t in CONVERSATION)
    assert any(t.expect_conflict == "safety_over_ambition" for t in CONVERSATION)


def test_blackboard_holds_patterns_with_evidence(steps: dict[str, list[Step]]) -> None:
    for user in ("alex", "jonas"):
        final = steps[user][-1].shadow
        assert len(final.patterns) >= 3
        assert all(p.evidence and p.confidence > 0 for p in final.patterns if p.occurrences >= 2)
        recurring = [g for g in final.stated_goals if g.sessions_mentioned >= 2]
        assert recurring, user
    alex = {p.pattern.value for p in steps["alex"][-1].shadow.patterns}
    assert {"avoidance", "perfectionism", "overcommitment", "self_criticism"} <= alex


def test_persona_confidence_rises_with_evidence(steps: dict[str, list[Step]]) -> None:
    for user in ("alex", "jonas"):
        seq = [s.persona.confidence for s in steps[user]]
        assert seq == sorted(seq), user  # evidence only accumulates
        assert seq[-1] > seq[0]
        assert all(t.confidence < 0.75 for t in steps[user][-1].persona.ocean.values())
    assert "fitness" in steps["jonas"][-1].persona.recurring_goals


def test_blocked_steps_blocked_and_never_in_any_reply(steps: dict[str, list[Step]]) -> None:
    for s in _all(steps):
        blocked = {b.step_id for b in s.stability.blocked_steps}
        assert set(s.turn.expect_blocked) <= blocked, s.turn.turn_id
        markers = [m for b in s.stability.blocked_steps for m in b.markers]
        assert find_markers(s.final.text, markers) == [], (s.turn.turn_id, s.final.text)
        # Coach only knew last turn's blocks plus its own screen of this message.
        coach_markers = [m for sid in s.coach.avoided_steps for m in CATALOGUE[sid].markers]
        assert find_markers(s.coach.text, coach_markers) == [], s.turn.turn_id


def test_ambition_vs_safety_conflicts_recorded(steps: dict[str, list[Step]]) -> None:
    for s in _all(steps):
        if s.turn.expect_conflict:
            rules = {(c.rule, c.winner, c.overruled) for c in s.final.conflicts}
            assert (s.turn.expect_conflict, "stability", "persona") in rules, s.turn.turn_id
            assert s.persona.stretch_goals, "Persona must actually have pushed for ambition"
            assert not s.final.sheet.stretch


def test_crisis_turns_get_safe_replies_with_resources(steps: dict[str, list[Step]]) -> None:
    crisis_turns = [s for s in _all(steps) if s.turn.expect_crisis]
    assert len(crisis_turns) == 2
    for s in crisis_turns:
        assert s.turn.expect_crisis is not None
        cat = CrisisCategory(s.turn.expect_crisis)
        assert s.stability.crisis.category is cat
        assert s.stability.crisis.escalated
        for text in (s.coach.text, s.final.text):
            for number in SHIPPED.required_numbers(cat, s.turn.language):
                assert number in text, (s.turn.turn_id, number)
        assert s.coach.crisis_mode
        assert s.final.crisis_mode
        assert s.final.sheet.focus_goal is None or s.final.sheet.mode == "crisis"


def test_turn_after_crisis_is_a_check_in(steps: dict[str, list[Step]]) -> None:
    after = next(s for s in steps["alex"] if "post_crisis" in s.turn.tags)
    assert after.final.sheet.mode == "care"
    assert after.stability.post_crisis
    assert "988" in after.final.text
    later = steps["alex"][-1]
    assert later.final.sheet.gentle  # still soon after: no hard forecasts
    assert "more likely to slip" not in later.final.text


def test_replies_are_clean_in_the_right_language_and_register(steps: dict[str, list[Step]]) -> None:
    for s in _all(steps):
        assert s.final.problems == [], (s.turn.turn_id, s.final.problems)
        for text in (s.final.text, s.coach.text):
            assert detect_language(text) == s.turn.language, (s.turn.turn_id, text)
            assert not re.search(
                r"(?i)\b(?:shadow|persona|plasticity|synth)\b|[{}\[\]]|\w_\w", text
            )
            if s.turn.language == "de" and s.turn.register == "formal":
                assert not _DU.search(text), (s.turn.turn_id, text)
            if s.turn.language == "de" and s.turn.register == "informal":
                assert not _SIE_MID.search(text), (s.turn.turn_id, text)


def test_replies_are_specific_varied_and_not_echoes(steps: dict[str, list[Step]]) -> None:
    finals = [s.final.text for s in _all(steps)]
    coaches = [s.coach.text for s in _all(steps)]
    non_crisis = [s for s in _all(steps) if s.final.sheet.mode in ("coach", "safety")]
    assert len(set(finals)) >= len(finals) - 3  # crisis replies may repeat, coaching must not
    assert len(set(coaches)) >= len(coaches) // 2
    for s in non_crisis:
        assert s.turn.text not in s.final.text, s.turn.turn_id
        assert s.turn.text not in s.coach.text, s.turn.turn_id
        for word in s.turn.expect_mentions:
            assert word in s.final.text.lower() or word in s.coach.text.lower(), (
                s.turn.turn_id,
                word,
            )


def test_deterministic_replay(steps: dict[str, list[Step]]) -> None:
    again = replay("jonas")
    assert [s.final.text for s in again] == [s.final.text for s in steps["jonas"]]


def test_every_turn_is_handled_for_every_user() -> None:
    for user in USERS:
        assert len(replay(user)) == len(turns_for(user))
