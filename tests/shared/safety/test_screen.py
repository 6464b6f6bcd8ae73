"""The crisis screen of one message (coachbus.safety.screen); its evaluation on labelled
data is tests/shared/test_crisis.py."""

from __future__ import annotations

import math

import pytest

from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.learned import LinearModel
from coachbus.llm import Policy
from coachbus.normalize import NormalizedText
from coachbus.safety import screen
from coachbus.safety.calibration import CLEAN, LEARNED, UNCERTAIN, calibration
from coachbus.safety.screen import (
    assess,
    is_crisis,
    merge_screens,
    needs_check_in,
    screen_crisis,
)

pytestmark = pytest.mark.unit

C = CrisisCategory
# The policy's bar for the risk_screen decision: an uncertain screen must be below it.
BAR = Policy.load().for_kind("risk_screen").min_confidence


@pytest.mark.parametrize(
    ("message", "category"),
    [
        ("I don't want to live anymore.", C.SUICIDAL_IDEATION),
        ("Sometimes I think about killing myself.", C.SUICIDAL_IDEATION),
        ("Ich will nicht mehr leben.", C.SUICIDAL_IDEATION),
        ("Ich denke an Suizid.", C.SUICIDAL_IDEATION),
        ("I cut myself again last night.", C.SELF_HARM),
        ("Ich ritze mich wieder.", C.SELF_HARM),
        ("My husband hits me when he drinks.", C.ABUSE),
        ("Mein Mann schlägt mich.", C.ABUSE),
        ("I have chest pain and can't breathe.", C.MEDICAL_EMERGENCY),
        ("Ich habe zu viele Tabletten genommen.", C.MEDICAL_EMERGENCY),
        # What the old screen missed (the issue's own probes).
        ("Ich bringe mich um", C.SUICIDAL_IDEATION),
        ("ich bring mich um", C.SUICIDAL_IDEATION),
        ("I can’t stop thinking about killing myself", C.SUICIDAL_IDEATION),
        ("i wanna dieee", C.SUICIDAL_IDEATION),
        ("kms", C.SUICIDAL_IDEATION),
        ("ich moechte nicht mehr aufwachen", C.SUICIDAL_IDEATION),
        ("Ich möchte mir das Leben nehmen", C.SUICIDAL_IDEATION),
        ("ich mach Schluss mit allem", C.SUICIDAL_IDEATION),
        ("everyone would be better off without me", C.SUICIDAL_IDEATION),
        ("I have saved up pills for this weekend", C.SUICIDAL_IDEATION),
        ("hab mich gestern wieder geritzt", C.SELF_HARM),
    ],
)
def test_rules_find_each_category(message: str, category: CrisisCategory) -> None:
    screen = screen_crisis(message)
    assert screen.category is category, assess(message)
    assert screen.escalated
    assert screen.matched
    assert not screen.uncertain


@pytest.mark.parametrize(
    "message",
    [
        "This job is killing me.",
        "I'm dying to try the new trail.",
        "I killed it at the gym today.",
        "Ich bin todmüde, aber gut gelaufen.",
        "die Hitze bringt mich um",
        "I want to quit sugar.",
        "this deadline is killing me",
        "Ich mache Schluss mit meinem Freund.",
        "I want to end my subscription.",
    ],
)
def test_figurative_speech_stays_a_normal_turn(message: str) -> None:
    screen = screen_crisis(message)
    assert screen.category is C.NONE
    assert not screen.escalated
    assert not screen.uncertain


def test_a_reassurance_is_not_a_crisis() -> None:
    assert not is_crisis(screen_crisis("Don't worry, I would never kill myself."))


def test_risk_cues_without_a_rule_are_uncertain_below_the_policy_bar() -> None:
    # Measured confidence of the uncertain bucket: low enough that a model is asked.
    assert calibration().of(UNCERTAIN) < BAR
    screen = screen_crisis("ich will einfach nicht mehr")
    assert screen.uncertain and screen.escalated
    assert screen.category is C.NONE
    assert screen.confidence < BAR
    assert needs_check_in(screen)


def test_confidence_is_the_measured_one() -> None:
    finding = assess("I want to kill myself.")
    assert finding.confidence == calibration().of(finding.outcome)
    clean = assess("I went for a run this morning and it felt good.")
    assert clean.outcome == CLEAN
    assert clean.confidence == calibration().of(CLEAN)


def _screen(category: C, confidence: float, *, uncertain: bool = False) -> CrisisScreen:
    return CrisisScreen(
        category=category,
        confidence=confidence,
        matched=[],
        escalated=category is not C.NONE or uncertain,
        uncertain=uncertain,
    )


def test_merging_keeps_a_crisis_and_lets_a_model_settle_an_uncertain_screen() -> None:
    found = _screen(C.SUICIDAL_IDEATION, 0.7)
    clear = _screen(C.NONE, 0.9)
    unsure = _screen(C.NONE, 0.4, uncertain=True)
    merge = merge_screens
    assert merge(found, clear) is found  # a model never clears a rule's crisis
    assert merge(unsure, clear) is clear  # that is what the model was asked
    assert merge(clear, unsure) is clear
    assert merge(unsure, found).category is C.SUICIDAL_IDEATION
    assert merge(_screen(C.ABUSE, 0.9), found).category is C.SUICIDAL_IDEATION


def test_screens_of_the_raw_and_the_normalised_message_agree() -> None:
    text = "I can’t stop thinking about killing myself"
    assert screen_crisis(NormalizedText.of(text)) == screen_crisis(text)


def test_merging_keeps_the_rules_rung_for_the_same_category() -> None:
    # Coach asked the rules' question at once; a model that agrees on the category
    # with more confidence must not change what the person's next message answers.
    from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
    from coachbus.safety.screen import merge_screens, screen_crisis

    rules = screen_crisis("everyone would be better off without me")
    assert rules.asks == "suicide"
    model = CrisisScreen(
        category=CrisisCategory.SUICIDAL_IDEATION, confidence=0.99, matched=[], escalated=True
    )
    assert merge_screens(rules, model).asks == "suicide"
    # A crisis only the model saw asks the category's own question.
    assert merge_screens(screen_crisis("what should I cook tonight"), model).asks is None


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ('[asks]\nno_such_kind = "suicide"\n', "no rule has kind"),
        ('[asks]\nburden = "later"\n', "unknown question"),
    ],
)
def test_the_asks_table_is_checked(table: str, error: str) -> None:
    from importlib import resources

    from coachbus.safety.rulebook import parse_rulebook

    text = resources.files("coachbus.content").joinpath("crisis/rules.toml").read_text("utf-8")
    text = text.replace("[asks]\n", "[asks_shipped]\n", 1) + "\n" + table
    with pytest.raises(ValueError, match=error):
        parse_rulebook(text)


# --------------------------------------------------------------------------- learned reader


def _always(label: str, probability: float, bar: float = 0.5) -> LinearModel:
    """A reader that reads every message as ``label`` at ``probability``: no
    n-grams, an intercept at that rate (what the mechanism does, whatever the
    shipped weights)."""
    logit = math.log(probability / (1 - probability))
    return LinearModel((label,), {}, {label: {}}, {label: logit}, bar, {})


def test_the_learned_reader_asks_where_the_rules_saw_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(screen, "shipped", lambda name: _always(screen.RISK, 0.99))
    ordinary = screen.assess("I went to the gym and then cooked dinner for us")
    assert ordinary.outcome == LEARNED and ordinary.uncertain and ordinary.flagged
    assert ordinary.category is CrisisCategory.NONE  # never a crisis on n-grams alone
    assert ordinary.matched[0].startswith("learned: ")
    # A few words are the rules' alone.
    assert screen.assess("sounds good, thanks").outcome == CLEAN
    # A risk phrase the rules read and set aside (told as history) stays set aside.
    told = "Years ago I wanted to die. Therapy helped, I'm doing well now."
    assert screen.assess(told).outcome == CLEAN


def test_a_screen_made_with_one_reader_is_not_served_with_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = "I went to the gym and then cooked dinner for us"
    assert screen.assess(said).outcome == CLEAN  # the shipped reader: nothing
    monkeypatch.setattr(screen, "shipped", lambda name: _always(screen.RISK, 0.99))
    assert screen.assess(said).outcome == LEARNED


def test_a_threat_to_kill_tied_to_leaving_is_abuse_in_verb_second_order() -> None:
    said = "er hat gesagt wenn ich ihn verlass bringt er mich um. und ich glaub ihm das"
    assert screen_crisis(said).category is C.ABUSE


@pytest.mark.parametrize(
    "message",
    [
        "five years ago I was in a really dark place and tried to end it. "
        "I'm in a good spot now and want to run my first half marathon",
        "used to self harm in uni. clean 6 years now.",
        "After my divorce I had a few bad months where I didn't want to live. "
        "That's long behind me, therapy helped.",
        "Meine alten Narben vom Ritzen sieht man im Freibad noch. Ist lang her und ich steh dazu.",
    ],
)
def test_a_past_that_is_over_said_in_new_ways_is_no_crisis(message: str) -> None:
    assert not screen_crisis(message).escalated


def test_done_fighting_it_is_asked_about() -> None:
    said = "I'm not going to make it through another winter like the last one. I'm done fighting it"
    assert needs_check_in(screen_crisis(said))


def test_a_clean_screen_says_whether_a_guard_set_risk_words_aside() -> None:
    # The conversation reader's learned ask never second-guesses a guard's reading.
    assert screen.assess("this deadline is killing me, can we plan the week").set_aside
    plain = screen.assess("Can you help me plan my meals for the week?")
    assert plain.outcome == "clean" and not plain.set_aside


def test_burning_oneself_out_is_burnout_not_self_harm() -> None:
    # Conversations dev round 10: "how do I not burn myself out in the first month".
    said = "how do I not burn myself out in the first month somewhere new"
    assert screen_crisis(said).category is not CrisisCategory.SELF_HARM
    said = "sometimes I burn myself, it is the only thing that helps"
    assert screen_crisis(said).category is CrisisCategory.SELF_HARM


@pytest.mark.parametrize(
    ("message", "crisis"),
    [
        # Conversations dev round 19: not wanting to go on, said of life; a wish that a
        # car would hit me. Going on a trip or with a course is no wish to die.
        ("I just don't want to go on.", True),
        ("Most nights I wish a truck would come round the bend and hit me.", True),
        ("I don't want to go on the school trip.", False),
        ("I don't want to go on with this course, it's the wrong one.", False),
    ],
)
def test_not_wanting_to_go_on_is_a_passive_wish(message: str, crisis: bool) -> None:
    found = screen_crisis(message)
    assert (found.category is CrisisCategory.SUICIDAL_IDEATION) is crisis, message


def test_a_decision_and_a_bare_time_is_asked_and_a_decision_to_end_it_is_a_crisis() -> None:
    ended = screen_crisis("Ich habe mir vorgenommen, es heute Nacht zu beenden.")
    assert ended.category is CrisisCategory.SUICIDAL_IDEATION
    # A decision and a time with nothing said of what: asked, not a crisis.
    bare = screen_crisis("I've decided. Tonight.")
    assert bare.category is CrisisCategory.NONE and bare.uncertain
    # Said of something ordinary, it is ordinary.
    assert not screen_crisis("I have decided. Tonight I start running every morning.").uncertain
    # "Mit Suizid hat das nix zu tun": the word said only to deny it.
    denied = screen_crisis("Ich mein weg aus dieser Stadt. Mit Suizid hat das nix zu tun.")
    assert denied.category is CrisisCategory.NONE
