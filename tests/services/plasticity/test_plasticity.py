"""Plasticity: the mapping table and the strategy rules."""

from __future__ import annotations

import pytest

from coachbus import ocean
from coachbus.contracts.payloads import CoachingStrategy, PatternClass
from coachbus.contracts.state import Blackboard, ItemEvidence, PersonaProfile
from coachbus.topics import Topic
from services.plasticity.logic import Traits, plan, preferences
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def _profile(**items: float) -> PersonaProfile:
    ev = {int(k[1:]): ItemEvidence(agree=v, count=int(v)) for k, v in items.items()}
    return PersonaProfile(user_id="u1", items=ev)


def test_no_profile_gives_neutral_preferences() -> None:
    p = plan(None, msg("I want to run three times a week and keep it up."))
    assert p.profile_confidence == 0.0
    assert 0.4 <= p.preferences.challenge <= 0.5
    assert p.strategy is CoachingStrategy.IMPLEMENTATION_INTENTIONS


def test_high_neuroticism_means_warmer_less_challenge_shorter() -> None:
    calm = preferences(Traits(0.5, 0.5, 0.5, 0.5, 0.3), "x " * 30, "en", "informal")
    anxious = preferences(Traits(0.5, 0.5, 0.5, 0.5, 0.8), "x " * 30, "en", "informal")
    assert anxious.warmth > calm.warmth
    assert anxious.challenge < calm.challenge
    assert anxious.length == "short"


def test_conscientiousness_raises_structure_and_openness_autonomy() -> None:
    base = preferences(Traits(0.5, 0.5, 0.5, 0.5, 0.5), "x " * 30, "en", "informal")
    c = preferences(Traits(0.5, 0.8, 0.5, 0.5, 0.5), "x " * 30, "en", "informal")
    o = preferences(Traits(0.8, 0.5, 0.5, 0.5, 0.5), "x " * 30, "en", "informal")
    assert c.structure > base.structure
    assert o.autonomy_support > base.autonomy_support


def test_profile_traits_use_personas_derivation_and_are_shrunk() -> None:
    strong = _profile(i9=12.0)  # "gets nervous easily", lots of evidence
    weak = _profile(i9=1.0)
    p_strong = plan(strong, msg("Hello, how are you today, I have some news to share."))
    p_weak = plan(weak, msg("Hello, how are you today, I have some news to share."))
    assert p_strong.preferences.warmth > p_weak.preferences.warmth
    assert p_strong.profile_confidence == ocean.mean_confidence(ocean.derive_traits(strong.items))


@pytest.mark.parametrize(
    ("text", "strategy"),
    [
        ("I'm so lazy, what's wrong with me.", CoachingStrategy.SELF_COMPASSION),
        (
            "Part of me wants it, I don't know if I should.",
            CoachingStrategy.MOTIVATIONAL_INTERVIEWING,
        ),
        ("Should I quit and start my startup?", CoachingStrategy.VALUES_CLARIFICATION),
        ("It has to be perfect first.", CoachingStrategy.COGNITIVE_REFRAMING),
        ("I went for a run twice this week!", CoachingStrategy.SOLUTION_FOCUSED),
        ("Ich habe es geschafft, dreimal gelaufen.", CoachingStrategy.SOLUTION_FOCUSED),
    ],
)
def test_message_cues_choose_strategy(text: str, strategy: CoachingStrategy) -> None:
    assert plan(None, msg(text)).strategy is strategy


def test_remembered_pattern_chooses_strategy() -> None:
    profile = PersonaProfile(user_id="u1", last_pattern=PatternClass.AVOIDANCE)
    p = plan(profile, msg("Not much to report today, honestly."))
    assert p.strategy is CoachingStrategy.IMPLEMENTATION_INTENTIONS
    assert p.strategy_rationale


def test_shadows_board_beats_personas_copy_of_the_pattern() -> None:
    # Persona's copy lags Shadow by a turn or two: when they differ, the board wins.
    late_copy = PersonaProfile(user_id="u1", last_pattern=PatternClass.AVOIDANCE)
    board = Blackboard(user_id="u1", primary_pattern=PatternClass.PERFECTIONISM)
    p = plan(late_copy, msg("Not much to report today, honestly."), board)
    assert p.strategy is CoachingStrategy.COGNITIVE_REFRAMING


async def test_the_handler_reads_the_pattern_from_shadows_board() -> None:
    from services.plasticity import handlers

    user = "board-reader"
    handlers.profiles.apply(user, PersonaProfile(user_id=user, last_pattern=PatternClass.AVOIDANCE))
    handlers.boards.apply(
        user, Blackboard(user_id=user, primary_pattern=PatternClass.PERFECTIONISM)
    )
    try:
        result = await handlers.handle(msg("Not much to report today, honestly.", user=user))
    finally:
        handlers.profiles.apply(user, None)
        handlers.boards.apply(user, None)
    assert result.payload.strategy is CoachingStrategy.COGNITIVE_REFRAMING
    assert handlers.boards.topic == handlers.runtime.topic(Topic.BLACKBOARD)


def test_german_register_from_message_then_profile_then_formal_default() -> None:
    assert plan(None, msg("Kannst du mir helfen?")).preferences.formality == "informal"
    assert plan(None, msg("Ich möchte früher schlafen gehen.")).preferences.formality == "formal"
    prof = PersonaProfile(user_id="u1", formality="informal")
    assert plan(prof, msg("Ich möchte früher schlafen gehen.")).preferences.formality == "informal"
    assert plan(None, msg("I want to sleep earlier.")).language == "en"


def test_short_message_gets_short_reply_and_simple_reading_level() -> None:
    p = plan(None, msg("Ran today."))
    assert p.preferences.length == "short"
    assert p.preferences.reading_level == "simple"
