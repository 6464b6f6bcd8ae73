"""Shared text utilities: language, register, goals, markers."""

from __future__ import annotations

import pytest

from coachbus import text

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("I want to run three times a week but I keep skipping it.", "en"),
        ("Ich möchte dreimal pro Woche laufen gehen, aber ich schaffe es nicht.", "de"),
        ("Außerdem will ich mehr schlafen.", "de"),
        ("Mein Knie tut weh.", "de"),
    ],
)
def test_detect_language(sample: str, expected: str) -> None:
    assert text.detect_language(sample) == expected


def test_short_ambiguous_message_keeps_known_language() -> None:
    assert text.detect_language("ok", fallback="de") == "de"
    assert text.detect_language("ok", hint="en", fallback="de") == "en"


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("Kannst du mir helfen?", "informal"),
        ("Können Sie mir helfen?", "formal"),
        ("Sie hat gesagt, ich soll anfangen.", None),  # sentence-initial "Sie" = she
        ("Du kannst mich duzen.", "informal"),
        ("Bitte siezen Sie mich.", "formal"),
        ("Ich will laufen.", None),
    ],
)
def test_detect_register(sample: str, expected: str | None) -> None:
    assert text.detect_register(sample) == expected


def test_goal_extraction_english_keys_by_domain_and_trims_clause() -> None:
    goals = text.extract_goals("I want to run three times a week, but work gets in the way.")
    assert [(g.goal_id, g.text) for g in goals] == [("fitness", "run three times a week")]
    assert goals[0].quote.startswith("I want to run")


def test_goal_extraction_german_verb_second_order() -> None:
    goals = text.extract_goals("Außerdem will ich mehr schlafen.", "de")
    assert [g.goal_id for g in goals] == ["sleep"]


def test_speech_acts_are_not_goals() -> None:
    assert text.extract_goals("I want to tell you something. I need to admit it.") == []
    assert text.extract_goals("Ich will ehrlich sein.", "de") == []


def test_startup_goal_keyed_by_most_specific_domain() -> None:
    goals = text.extract_goals("I want to quit my job and go all in on my startup.")
    assert goals[0].goal_id == "business"


def test_markers_match_on_word_boundaries_only() -> None:
    assert text.find_markers("Go all in on it.", ["all in"]) == ["all in"]
    assert text.find_markers("Install it, ball inside.", ["all in"]) == []
    assert text.find_markers("Du solltest nicht kündigen.", ["kündigen"]) == ["kündigen"]


def test_sentences_and_quote_are_bounded() -> None:
    long = "word " * 100
    assert len(text.quote(long, 40)) <= 41
    assert text.sentences("One. Two! Three?\nFour") == ["One.", "Two!", "Three?", "Four"]


def test_stem_merges_inflections() -> None:
    assert text.stem("running") == text.stem("run")
    assert text.stem("laufen", "de") == text.stem("laufe", "de")


def test_pick_is_deterministic_and_varies_with_seed() -> None:
    opts = ["a", "b", "c"]
    assert text.pick(opts, 5) == text.pick(opts, 5)
    assert {text.pick(opts, text.seed_of(str(i))) for i in range(30)} == set(opts)


@pytest.mark.parametrize(
    "streak",
    [
        "week 6 and haven't missed a single session",
        "Walked 10k steps every day for a month, not one day missed",
        "Siebte Woche am Stück, kein einziges Training ausgelassen.",
        "Einen Monat lang jeden Tag 10.000 Schritte, keinen Tag verpasst.",
    ],
)
def test_a_streak_said_through_a_negated_miss_is_follow_through(streak: str) -> None:
    assert text.SETBACK_RX.search(streak) is None, streak
    assert text.FOLLOW_THROUGH_RX.search(streak) is not None, streak


def test_a_real_miss_beside_a_streak_is_still_a_setback() -> None:
    said = "haven't missed a session in weeks, but I skipped today"
    assert text.SETBACK_RX.search(said) is not None
    assert text.SETBACK_RX.search("I missed the run again") is not None


def test_content_words_skip_both_languages_stop_words() -> None:
    # The reply guard compares an answer with a question's two ways without knowing the
    # sheet's language: "nicht" and "the" are no content either way.
    assert text.content_words("Sit it out, nicht the race") == ["sit", "out", "race"]
