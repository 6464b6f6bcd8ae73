"""The crisis screen (coachbus.crisis); its evaluation on labelled data is
tests/evaluation/test_crisis.py."""

from __future__ import annotations

import pytest

from coachbus import crisis
from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.llm import Policy

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
    screen = crisis.screen_crisis(message)
    assert screen.category is category, crisis.assess(message)
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
    screen = crisis.screen_crisis(message)
    assert screen.category is C.NONE
    assert not screen.escalated
    assert not screen.uncertain


def test_a_reassurance_is_not_a_crisis() -> None:
    assert not crisis.is_crisis(crisis.screen_crisis("Don't worry, I would never kill myself."))


def test_risk_cues_without_a_rule_are_uncertain_below_the_policy_bar() -> None:
    # Measured confidence of the uncertain bucket: low enough that a model is asked.
    assert crisis.calibration().of(crisis.UNCERTAIN) < BAR
    screen = crisis.screen_crisis("ich will einfach nicht mehr")
    assert screen.uncertain and screen.escalated
    assert screen.category is C.NONE
    assert screen.confidence < BAR
    assert crisis.needs_check_in(screen)


def test_confidence_is_the_measured_one() -> None:
    finding = crisis.assess("I want to kill myself.")
    assert finding.confidence == crisis.calibration().of(finding.outcome)
    clean = crisis.assess("I went for a run this morning and it felt good.")
    assert clean.outcome == crisis.CLEAN
    assert clean.confidence == crisis.calibration().of(crisis.CLEAN)


def _screen(category: C, confidence: float, *, uncertain: bool = False) -> CrisisScreen:
    return CrisisScreen(
        category=category,
        confidence=confidence,
        matched=[],
        escalated=category is not C.NONE or uncertain,
        uncertain=uncertain,
    )


def test_worse_keeps_a_crisis_and_lets_a_model_settle_an_uncertain_screen() -> None:
    found = _screen(C.SUICIDAL_IDEATION, 0.7)
    clear = _screen(C.NONE, 0.9)
    unsure = _screen(C.NONE, 0.4, uncertain=True)
    assert crisis.worse(found, clear) is found  # a model never clears a rule's crisis
    assert crisis.worse(unsure, clear) is clear  # that is what the model was asked
    assert crisis.worse(clear, unsure) is clear
    assert crisis.worse(unsure, found).category is C.SUICIDAL_IDEATION
    assert crisis.worse(_screen(C.ABUSE, 0.9), found).category is C.SUICIDAL_IDEATION


def test_a_model_claim_must_quote_the_message() -> None:
    claim = crisis.RiskScreenCall(category=C.SUICIDAL_IDEATION, confidence=0.8, evidence=["x"])
    assert crisis.check_claim(claim, "I am fine") != []
    ok = claim.model_copy(update={"evidence": ["don’t want to be here"]})
    # Verbatim up to the normaliser (a typographic apostrophe in the message).
    assert crisis.check_claim(ok, "I don't want to be here anymore") == []


def test_every_outcome_the_screen_can_give_has_a_measured_confidence() -> None:
    # An outcome the calibration split never produced would fall back to the lowest
    # confidence in the table (the uncertain bucket's): measured, not defaulted.
    kinds = {r.kind for r in crisis.rulebook().rules}
    assert kinds | {crisis.UNCERTAIN, crisis.CLEAN} <= set(crisis.calibration().confidence)
