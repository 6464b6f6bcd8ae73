"""The user's primary pattern has one owner: Shadow writes it on the blackboard,
every other agent reads it there (issue: "one owner per fact")."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from coachbus.acl import ACCESS
from coachbus.contracts.payloads import CoachingStrategy, PatternClass
from coachbus.contracts.state import Blackboard, PatternRecord, PersonaProfile
from coachbus.topics import Topic
from services.coach import phrases as P
from services.coach.logic import quick_reply
from services.persona.logic import observe as persona_observe
from services.plasticity.logic import plan
from services.shadow.logic import observe as shadow_observe
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def _board_after_this_turn() -> Blackboard:
    """Avoidance seen 10 times, last five turns ago; perfectionism seen twice, the
    second time in this turn (the issue's example)."""
    before = Blackboard(
        user_id="u1",
        turn_count=9,
        sessions=["s1"],
        session_count=1,
        patterns={
            PatternClass.AVOIDANCE: PatternRecord(
                pattern=PatternClass.AVOIDANCE,
                occurrences=10,
                session_count=1,
                last_session="s1",
                last_turn=5,
            ),
            PatternClass.PERFECTIONISM: PatternRecord(
                pattern=PatternClass.PERFECTIONISM,
                occurrences=1,
                session_count=1,
                last_session="s1",
                last_turn=8,
            ),
        },
    )
    board, payload = shadow_observe(before, msg("It has to be perfect first.", turn="t10"))
    rec = board.patterns[PatternClass.PERFECTIONISM]
    assert (rec.occurrences, board.turn_count - rec.last_turn) == (2, 0)
    assert board.turn_count - board.patterns[PatternClass.AVOIDANCE].last_turn == 5
    assert payload.primary_pattern is PatternClass.PERFECTIONISM
    return board


def test_shadow_writes_its_primary_pattern_on_the_board() -> None:
    board = _board_after_this_turn()
    assert board.primary_pattern is PatternClass.PERFECTIONISM


def test_every_agent_names_what_shadow_names() -> None:
    board = _board_after_this_turn()
    # A turn with no pattern cue of its own. (Not "Not much to report today, honestly.":
    # the openers reader retrained on conversations dev rounds 23-24 asks our check-in
    # about it, 0.953 over its bar of 0.95, a flat "nothing to report" being how many of
    # its dev openers in distress begin; a measured false ask of the cheap tier, counted
    # in the ordinary messages the conversation report says it asks.)
    neutral = msg("Same as last week, nothing new.", turn="t11")

    profile, _ = persona_observe(None, board, neutral)
    assert profile.last_pattern is PatternClass.PERFECTIONISM

    # Plasticity reads the board when it has one, else Persona's copy: same answer.
    strategy = CoachingStrategy.COGNITIVE_REFRAMING  # rule 4: remembered perfectionism
    assert plan(None, neutral, board).strategy is strategy
    assert plan(profile, neutral).strategy is strategy

    reply = quick_reply(neutral, board, None)
    asks = [q.get("en", "informal") for q in P.QUESTION_BY_PATTERN[PatternClass.PERFECTIONISM]]
    assert any(q in reply.text for q in asks), reply.text


@pytest.mark.parametrize("agent", ["persona", "plasticity", "stability", "coach"])
def test_every_reader_has_a_view_of_the_board_and_may_read_it(agent: str) -> None:
    handlers: Any = importlib.import_module(f"services.{agent}.handlers")
    assert handlers.boards.topic == handlers.runtime.topic(Topic.BLACKBOARD)
    assert handlers.boards in handlers.runtime.state.views  # read-only: Shadow is the writer
    assert Topic.BLACKBOARD in ACCESS[agent].reads
    assert Topic.BLACKBOARD not in ACCESS[agent].writes


async def test_plasticity_takes_the_pattern_from_the_board_not_personas_late_copy() -> None:
    from services.plasticity import handlers

    board = _board_after_this_turn()  # Shadow: perfectionism, this turn
    # Persona's profile still names last turn's pattern (it reads the board a turn late).
    late = PersonaProfile(user_id="u1", last_pattern=PatternClass.AVOIDANCE)
    neutral = msg("Not much to report today, honestly.", turn="t11")
    handlers.boards.apply("u1", board)
    handlers.profiles.apply("u1", late)
    try:
        result = await handlers.handle(neutral)
    finally:
        handlers.boards.apply("u1", None)
        handlers.profiles.apply("u1", None)
    assert result.payload.strategy is CoachingStrategy.COGNITIVE_REFRAMING
    assert plan(late, neutral).strategy is CoachingStrategy.IMPLEMENTATION_INTENTIONS
