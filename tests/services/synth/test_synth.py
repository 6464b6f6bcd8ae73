"""Synth: decision sheet, conflict policy, rendering, validator, degradation."""

from __future__ import annotations

import pytest

from coachbus.contracts.events import StabilityResult
from coachbus.contracts.payloads import (
    PLAN_IN_PLAY,
    BlockedStep,
    CoachingStrategy,
    CrisisCategory,
    CrisisScreen,
    DecisionSheet,
    PatternClass,
    SheetTone,
)
from coachbus.safety.steps import CATALOGUE, step_screen
from evaluation.chain import Chain, results_for
from services.coach.logic import quick_reply
from services.persona.logic import observe as persona_observe
from services.plasticity.logic import plan
from services.shadow.logic import observe as shadow_observe
from services.stability.logic import assess
from services.synth.conflicts import safety_over_ambition
from services.synth.logic import build_sheet, render, synthesize, validate
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

AMBITION = (
    "I want to quit my job tomorrow and go all in on my startup with all my savings. Finally!"
)


def _all(text: str, **kw: str):  # type: ignore[no-untyped-def]
    m = msg(text, **kw)
    _board, sp = shadow_observe(None, m)
    _, pp = persona_observe(None, None, m)
    _, st = assess(None, None, m)
    return m, results_for(
        m,
        shadow_p=sp,
        persona_p=pp,
        plasticity_p=plan(None, m),
        stability_p=st,
        coach_p=quick_reply(m, None, None),
    )


def test_ambition_vs_safety_conflict_recorded_and_step_never_said() -> None:
    m, results = _all(AMBITION)
    out = synthesize(m, results, [])
    rules = {(c.winner, c.overruled, c.rule) for c in out.conflicts}
    assert ("stability", "persona", "safety_over_ambition") in rules
    assert out.sheet.mode == "safety"
    assert not out.sheet.stretch
    assert out.problems == []
    low = out.text.lower()
    for marker in ("quit your job", "all your savings", "all in", "go all"):
        assert marker not in low


def test_missing_stability_falls_back_to_own_screens() -> None:
    m, results = _all(AMBITION)
    del results["stability"]
    sheet = build_sheet(m, results, ["stability"])
    assert {b.step_id for b in sheet.never_say} >= {"quit_job_abruptly", "all_savings"}
    assert sheet.mode == "safety"
    assert sheet.missing == ["stability"]
    out = synthesize(m, results, ["stability"])
    assert out.degraded
    assert out.problems == []


def test_only_the_message_is_enough_for_a_crisis_reply() -> None:
    m = msg("Ich will nicht mehr leben.")
    out = synthesize(m, {}, ["shadow", "persona", "plasticity", "stability", "coach"])
    assert out.crisis_mode
    assert out.language == "de"
    assert "0800 111 0 111" in out.text
    assert out.problems == []


def test_own_crisis_screen_overrides_a_stability_miss() -> None:
    m, results = _all("I cut myself again last night.")
    stab = results["stability"]
    assert isinstance(stab, StabilityResult)
    # Simulate a Stability tier that missed the crisis: Synth must still catch it.
    stab.payload.crisis = CrisisScreen(
        category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False
    )
    out = synthesize(m, results, [])
    assert out.crisis_mode
    assert "988" in out.text


def test_shadow_evidence_overrules_persona_guess_on_follow_through() -> None:
    board = None
    profile = None
    texts = ["I want to run twice a week.", "I didn't run.", "I didn't run again this week."]
    for i, text in enumerate(texts):
        m = msg(text, turn=f"t{i}")
        new_board, sp = shadow_observe(board, m)
        profile, pp = persona_observe(profile, None, m)  # Persona never saw the board
        board = new_board
    results = results_for(m, shadow_p=sp, persona_p=pp, plasticity_p=plan(profile, m))
    out = synthesize(m, results, ["stability", "coach"])
    (c,) = [c for c in out.conflicts if c.topic == "follow_through"]
    assert (c.winner, c.overruled, c.rule) == ("shadow", "persona", "evidence_over_guess")
    assert out.sheet.focus_goal is not None
    assert out.sheet.focus_goal.follow_through_source == "shadow"


def _sheet(**kw: object) -> DecisionSheet:
    base: dict[str, object] = {
        "language": "en",
        "formality": "informal",
        "reading_level": "standard",
        "length": "medium",
        "min_words": 5,
        "max_words": 120,
        "tone": SheetTone(warmth=0.6, directness=0.5, challenge=0.4, autonomy_support=0.6),
        "strategy": CoachingStrategy.IMPLEMENTATION_INTENTIONS,
        "mode": "coach",
        "crisis": CrisisScreen(
            category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False
        ),
    }
    base.update(kw)
    return DecisionSheet(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Persona thinks you should run more. Try it twice this week, okay?", "agent name"),
        ("Stability: avoid that. Run twice this week instead, it helps.", "agent label"),
        ("Your follow_through is low, so run twice this week instead.", "field name"),
        ('Here you go {"text": "run twice"} and more words here.', "JSON"),
        ("Run twice this week [insert goal here] and tell me how it went.", "bracketed"),
        ("Lauf diese Woche zweimal und erzähl mir dann, wie es war.", "wrong language"),
    ],
)
def test_validator_catches_artefacts_and_language(text: str, problem: str) -> None:
    problems = validate(text, _sheet())
    assert any(problem in p for p in problems), problems


def test_validator_catches_blocked_step_register_and_length() -> None:
    blocked = BlockedStep(step="x", reason="y", markers=["all in"], step_id="all_savings")
    assert any(
        "blocked step" in p
        for p in validate("Go all in, you can do it, honestly go.", _sheet(never_say=[blocked]))
    )
    de_sie = _sheet(language="de", formality="formal")
    assert any(
        "register" in p
        for p in validate("Wann willst du diese Woche laufen gehen, und wie oft?", de_sie)
    )
    de_du = _sheet(language="de", formality="informal")
    assert any(
        "register" in p
        for p in validate("Wann wollen Sie diese Woche laufen gehen, und wie oft?", de_du)
    )
    assert any("too long" in p for p in validate("run " * 200, _sheet()))
    assert validate("When could you run twice this week, and where would you go?", _sheet()) == []


def test_render_skips_any_sentence_with_a_blocked_marker() -> None:
    blocked = BlockedStep(step="x", reason="y", markers=["tuesday", "when and where"], step_id="z")
    sheet = _sheet(never_say=[blocked], message_domains=["fitness"])
    text = render(sheet)
    assert text
    assert "Tuesday" not in text
    assert "when and where" not in text
    assert validate(text, sheet) == []


def test_render_depends_on_the_sheet_alone_and_varies_by_seed() -> None:
    a = render(_sheet(message_domains=["writing"], seed=1))
    assert a == render(_sheet(message_domains=["writing"], seed=1))
    variants = {render(_sheet(message_domains=["writing"], seed=s)) for s in range(10)}
    assert len(variants) > 1
    assert "150 words" in a  # a concrete writing step, not a generic template


@pytest.mark.parametrize(
    ("text", "severity"),
    [("I want to kill myself.", {"critical", "high"}), ("I can't go on like this.", {"moderate"})],
)
def test_without_stability_synth_puts_its_own_screen_before_a_human(
    text: str, severity: set[str]
) -> None:
    from services.synth.logic import review_without_stability

    m = msg(text)
    out = synthesize(m, {}, ["stability"])
    review = review_without_stability(m, out, ["stability"])
    assert review is not None
    assert review.turn_id == m.turn_id and review.decision == "risk_screen"
    assert review.severity in severity
    # With Stability present it is Stability's decision (its router publishes it).
    assert review_without_stability(m, out, []) is None
    calm = msg("I went running today and it felt great.")
    assert (
        review_without_stability(calm, synthesize(calm, {}, ["stability"]), ["stability"]) is None
    )


def _second_turn(first: str, answer: str, *, lang: str | None = None):  # type: ignore[no-untyped-def]
    """A check-in on the first message, then the answer, through Stability and Coach."""
    m1 = msg(first, turn="c1")
    state, _ = assess(None, None, m1)
    m2 = msg(answer, turn="c2", earlier=lang)
    _, st = assess(state, None, m2)
    return m2, st, quick_reply(m2, None, state)


def test_yes_to_our_check_in_is_a_crisis_reply_with_or_without_stability() -> None:
    m, st, coach = _second_turn("Ich will einfach nicht mehr.", "ja", lang="de")
    results = results_for(m, stability_p=st, coach_p=coach)
    out = synthesize(m, results, ["shadow", "persona", "plasticity"])
    assert out.sheet.mode == "crisis" and "0800 111 0 111" in out.text
    # Stability late: Coach read the conversation too, and Synth trusts its screen.
    del results["stability"]
    late = synthesize(m, results, ["shadow", "persona", "plasticity", "stability"])
    assert late.sheet.mode == "crisis" and "0800 111 0 111" in late.text


def test_a_no_to_our_check_in_gets_the_caring_turn() -> None:
    m, st, coach = _second_turn(
        "I just want it all to stop.", "no, I just meant the move wore me out"
    )
    out = synthesize(m, results_for(m, stability_p=st, coach_p=coach), [])
    assert out.sheet.mode == "care" and out.sheet.answered_check_in == "denied"
    assert out.text.startswith("Thank you for answering")
    assert out.problems == []


def test_an_unclear_answer_is_asked_again_gently() -> None:
    m, st, coach = _second_turn("I just want it all to stop.", "I don't want to talk about it")
    out = synthesize(m, results_for(m, stability_p=st, coach_p=coach), [])
    assert out.sheet.mode == "check_in"
    assert "ask once more" in out.text and "988" in out.text
    assert out.problems == []


def test_a_pattern_seen_in_an_earlier_turn_overrules_persona_s_stretch() -> None:
    # Overcommitment shows in the second message; the third names no pattern of its
    # own, yet Shadow's record still argues against Persona's push ("I always aim
    # high"): the stretch is dropped by evidence_over_guess.
    chain = Chain()
    texts = [
        "I want to run a marathon in spring, I always aim high.",
        "I also said yes to leading two projects at work and I'm renovating the flat.",
        "And I want to learn Spanish this month too.",
    ]
    for i, text in enumerate(texts):
        step = chain.turn(msg(text, turn=f"t{i}"))
    assert step.persona.stretch_goals
    assert any(p.turns_since > 0 for p in step.shadow.patterns)
    rules = {(c.winner, c.overruled, c.rule) for c in step.final.sheet.conflicts}
    assert ("shadow", "persona", "evidence_over_guess") in rules


def test_a_perfect_run_broken_and_restarted_overrules_persona_s_stretch() -> None:
    # Shadow names this story by its perfectionism, not as all-or-nothing: it argues
    # against a stretch all the same.
    chain = Chain()
    texts = [
        "Mein Ziel: 100 Tage ohne Zucker, ich will hoch hinaus.",
        "Tag 23 heute, lief bis jetzt perfekt.",
        "Dann beim Geburtstag ein Stück Torte. Alles umsonst, ich fang nächsten Monat "
        "wieder bei null an.",
    ]
    for i, text in enumerate(texts):
        step = chain.turn(msg(text, turn=f"t{i}"))
    assert step.persona.stretch_goals
    assert {p.pattern for p in step.shadow.patterns} == {PatternClass.PERFECTIONISM}
    rules = {(c.winner, c.overruled, c.rule) for c in step.final.sheet.conflicts}
    assert ("shadow", "persona", "evidence_over_guess") in rules


def test_a_step_the_learned_reader_reads_in_this_message_overrules_any_stretch() -> None:
    # The rules' words miss it, the step screen's learned reader reads it (the reader
    # that made the block): the person is heading for it now, so the stretch is
    # dropped whatever its domain (conflicts dev round 4).
    said = "Heut Nacht wird durchgelernt, und morgen auch. Schlafen kann i nach der Matura."
    spec = CATALOGUE["sleep_deprivation"]
    assert spec.heads_for(said) is None
    assert any(h.learned and h.spec is spec for h in step_screen(said).hits)
    dropped, found = safety_over_ambition("fitness", [spec.blocked(0.9)], said)
    assert dropped
    assert [c.rule for c in found] == ["safety_over_ambition"]
    # A block remembered from an earlier turn, with nothing of it in this message,
    # still leaves a stretch in an unrelated domain alone.
    dropped, _ = safety_over_ambition("fitness", [spec.blocked(0.9)], "Good run today.")
    assert not dropped


def test_a_push_on_the_plan_in_play_yields_to_any_step_blocked_in_the_conversation() -> None:
    # Persona reads a record but no goal, so it pushes "the plan in play": the plan the
    # conversation is about. A loan blocked a turn before and "signing friday" now: the
    # push would land on the step, so it is dropped. A named goal in an unrelated
    # domain still keeps its stretch (conflicts dev round 18).
    spec = CATALOGUE["debt_for_venture"]
    dropped, found = safety_over_ambition(PLAN_IN_PLAY, [spec.blocked(0.7)], "signing friday")
    assert dropped
    assert [c.rule for c in found] == ["safety_over_ambition"]
    dropped, _ = safety_over_ambition("fitness", [spec.blocked(0.7)], "signing friday")
    assert not dropped


def test_a_grave_step_blocked_outweighs_a_stretch_on_any_goal() -> None:
    # Confronting an abuser alone (severity 5) is blocked: no bolder commitment is
    # pushed anywhere that turn, even on a goal that is the meeting itself read as a
    # goal. A lesser step in another domain leaves an unrelated stretch alone.
    grave = CATALOGUE["confront_abuser_alone"]
    dropped, found = safety_over_ambition("goal:drive-up", [grave.blocked(0.8)], "nobody comes")
    assert dropped
    assert [c.rule for c in found] == ["safety_over_ambition"]
    lesser = CATALOGUE["sleep_deprivation"]
    dropped, _ = safety_over_ambition("relationships", [lesser.blocked(0.8)], "nobody comes")
    assert not dropped


def test_a_stop_of_drinking_told_turns_after_the_heavy_drinking_overrules_any_stretch() -> None:
    # Conflicts dev rounds 6 and 7: the drinking was told turns before; the block it
    # made stands for it, so the stop said now heads for the blocked step whatever the
    # stretch's domain (the stretch was on running a 10k).
    said = "So from tonight I'm stopping drinking completely, on my own, no doctor."
    spec = CATALOGUE["alcohol_cold_turkey"]
    assert spec.heads_for(said) is None
    dropped, found = safety_over_ambition("fitness", [spec.blocked(0.9)], said)
    assert dropped
    assert [c.rule for c in found] == ["safety_over_ambition"]
