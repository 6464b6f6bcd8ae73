"""Shadow: the blackboard, goals, priorities, follow-through, patterns."""

from __future__ import annotations

import pytest

from coachbus.contracts.payloads import PatternClass, TurnSignal
from coachbus.contracts.state import MAX_DOMAINS, MAX_GOALS, MAX_QUOTES, Blackboard
from services.shadow.logic import observe
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def _run(texts: list[tuple[str, str]]) -> Blackboard:
    board: Blackboard | None = None
    for i, (session, text) in enumerate(texts):
        board, _ = observe(board, msg(text, turn=f"t{i}", session=session))
    assert board is not None
    return board


def test_new_board_and_goal_with_quote() -> None:
    board, payload = observe(None, msg("I want to run three times a week."))
    assert board.user_id == "u1"
    assert board.has_applied("t1")
    assert board.version == 1
    (goal,) = payload.stated_goals
    assert goal.goal_id == "fitness"
    assert goal.text == "run three times a week"
    assert goal.quote == "I want to run three times a week."
    assert payload.signals == [TurnSignal.NEW_GOAL]
    assert payload.focus_goal == "fitness"


def test_redelivery_is_idempotent() -> None:
    m = msg("I didn't run this week.")
    board, first = observe(Blackboard(user_id="u1"), m)
    again, second = observe(board, m)
    assert again is board
    assert second == first


def test_input_board_is_not_mutated() -> None:
    before = Blackboard(user_id="u1")
    observe(before, msg("I want to write a novel."))
    assert before.goals == []
    assert before.version == 0


def test_goal_recurs_across_sessions_and_setbacks_make_avoidance() -> None:
    board = _run(
        [
            ("s1", "I want to run three times a week."),
            ("s1", "I didn't run at all."),
            ("s2", "I still want to run three times a week."),
            ("s2", "Skipped running again, I scrolled on my phone instead."),
        ]
    )
    (goal,) = [g for g in board.goals if g.goal_id == "fitness"]
    assert goal.session_count == 2
    assert goal.setbacks == 2
    assert goal.progress == 0
    _, payload = observe(board, msg("ok", turn="t-final", session="s2"))
    assert "fitness" in payload.avoided_goals
    avoidance = next(p for p in payload.patterns if p.pattern is PatternClass.AVOIDANCE)
    assert avoidance.evidence
    assert avoidance.occurrences >= 1
    pred = next(f for f in payload.follow_through if f.goal_id == "fitness")
    assert pred.probability < 40
    assert pred.evidence == 2
    assert pred.reasons


def test_steady_progress_needs_reports_in_different_turns() -> None:
    board = _run(
        [
            ("s1", "I want to run twice a week."),
            ("s1", "I went for a run on Monday."),
            ("s2", "I ran 5 km on Thursday."),
        ]
    )
    _, payload = observe(board, msg("Still going.", turn="t9", session="s2"))
    assert any(p.pattern is PatternClass.STEADY_PROGRESS for p in payload.patterns)
    pred = next(f for f in payload.follow_through if f.goal_id == "fitness")
    assert pred.probability >= 60


def test_actual_priorities_follow_words_and_time() -> None:
    board = _run(
        [
            ("s1", "I want to write a novel."),
            ("s1", "I spent the whole weekend on slides for my boss, work work work, hours of it."),
        ]
    )
    _, payload = observe(board, msg("Yes.", turn="t9"))
    top = payload.actual_priorities[0]
    assert top.domain == "work"
    assert top.share > 0.5
    assert "boss" in top.evidence


def test_pattern_taxonomy_german_cues() -> None:
    board = _run(
        [
            ("s1", "Ich möchte mein Buch schreiben, aber es muss perfekt sein."),
            ("s1", "Ich bin so faul, typisch ich."),
            ("s1", "Alles oder nichts, sonst zählt es nicht."),
        ]
    )
    assert {
        PatternClass.PERFECTIONISM,
        PatternClass.SELF_CRITICISM,
        PatternClass.ALL_OR_NOTHING,
    } <= set(board.patterns)


def test_pattern_confidence_grows_and_primary_is_recent() -> None:
    texts = [("s1", "I keep putting it off."), ("s2", "Postponed again, next week maybe.")]
    board = _run(texts)
    _, p = observe(board, msg("Put it off once more.", turn="t9", session="s3"))
    proc = next(x for x in p.patterns if x.pattern is PatternClass.PROCRASTINATION)
    assert proc.occurrences == 3
    assert proc.confidence > 0.6
    assert proc.turns_since == 0
    assert p.primary_pattern is PatternClass.PROCRASTINATION
    assert p.confidence == proc.confidence


def test_worry_is_not_a_setback() -> None:
    board = _run(
        [
            ("s1", "Ich möchte laufen gehen."),
            ("s1", "Ich habe Angst, dass ich es wieder nicht schaffe."),
        ]
    )
    assert board.goals[0].setbacks == 0


def test_crisis_message_yields_no_goals_or_quotes() -> None:
    board, payload = observe(None, msg("I want to end my life."))
    assert payload.stated_goals == []
    assert payload.patterns == []
    assert board.turn_count == 1


def test_board_stays_bounded() -> None:
    wishes = [
        "run",
        "write a novel",
        "learn spanish",
        "sleep earlier",
        "save money",
        "cook",
        "meditate",
        "play guitar",
        "tidy the flat",
        "call my mum",
        "stop smoking",
        "use my phone less",
        "get a promotion",
        "start a business",
    ]
    board: Blackboard | None = None
    for i in range(120):
        t = wishes[i % len(wishes)]
        board, _ = observe(
            board,
            msg(
                f"I want to {t}. I did not {t} today because it was {i}.",
                turn=f"t{i}",
                session=f"s{i // 5}",
            ),
        )
    assert board is not None
    assert len(board.goals) <= MAX_GOALS
    assert len(board.domains) <= MAX_DOMAINS
    assert all(len(p.evidence) <= MAX_QUOTES for p in board.patterns.values())
    assert all(len(g.evidence) <= MAX_QUOTES for g in board.goals)
    assert len(board.model_dump_json()) < 40_000
