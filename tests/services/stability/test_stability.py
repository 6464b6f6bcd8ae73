"""Stability: risk frame, blocked steps with memory, crisis screen."""

from __future__ import annotations

import pytest

from coachbus.contracts.payloads import CrisisCategory
from coachbus.contracts.state import SafetyState
from services.stability.logic import BLOCK_TTL, assess
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit


def test_calm_message_is_low_risk() -> None:
    state, p = assess(None, None, msg("I went for a run today."))
    assert p.overall == "low"
    assert p.blocked_steps == []
    assert p.risks == []
    assert p.crisis.category is CrisisCategory.NONE
    assert not p.crisis.escalated
    assert state.turn_count == 1


def test_ambition_message_blocks_steps_with_risk_frame() -> None:
    _, p = assess(
        None, None, msg("I want to quit my job tomorrow and go all in with all my savings.")
    )
    ids = {b.step_id for b in p.blocked_steps}
    assert ids == {"quit_job_abruptly", "all_savings"}
    assert p.overall == "high"
    for r in p.risks:
        assert r.priority == r.severity * r.detectability * r.reversibility
    assert all(b.markers and b.safer_alternative for b in p.blocked_steps)
    assert p.blocked_steps[0].step_id == "all_savings"  # highest priority first


def test_blocks_are_remembered_then_expire() -> None:
    state, _ = assess(None, None, msg("I'll put all my savings into the café.", turn="t0"))
    state, p = assess(state, None, msg("Anyway, how do I sleep better?", turn="t1"))
    (kept,) = p.blocked_steps
    assert kept.step_id == "all_savings"
    assert kept.confidence < 0.9
    assert p.overall == "moderate"
    for i in range(BLOCK_TTL + 1):
        state, p = assess(state, None, msg("Fine.", turn=f"x{i}"))
    assert p.blocked_steps == []


def test_injury_is_remembered_for_later_training_plans() -> None:
    state, p = assess(None, None, msg("Mein Knie tut weh seit Sonntag.", turn="t0"))
    assert p.blocked_steps == []
    state, p = assess(state, None, msg("Ich will jetzt jeden Tag trainieren.", turn="t1"))
    assert [b.step_id for b in p.blocked_steps] == ["train_through_injury"]


def test_heavy_drinking_is_remembered_for_a_later_stop_at_once() -> None:
    # Conflicts dev rounds 6 and 7: the drinking told in the first turn, the stop
    # "from tonight, on my own" two turns later is stopping at once after heavy
    # daily drinking: the withdrawal risk.
    said = "It's about a bottle of vodka a day now and my hands shake in the morning."
    state, _ = assess(None, None, msg(said, turn="t0"))
    assert "heavy_drinking" in state.conditions
    state, _ = assess(state, None, msg("Got a job at the garden centre, six weeks in.", turn="t1"))
    stop = "So from tonight I'm stopping drinking completely, on my own."
    state, p = assess(state, None, msg(stop, turn="t2"))
    assert "alcohol_cold_turkey" in [b.step_id for b in p.blocked_steps]


def test_a_fever_told_earlier_makes_racing_anyway_the_step() -> None:
    # Conflicts dev: the fever in one turn, "racing saturday no matter what" two turns
    # later: Stability remembers the fever and blocks the going ahead; a fever said to
    # be over is forgotten. (Without the fever the same words are no step: the rules'
    # side of it is in tests/shared/safety/test_steps.py.)
    state, _ = assess(None, None, msg("in bed since yesterday with a fever, 38.8", turn="t0"))
    assert "illness" in state.conditions
    state, _ = assess(state, None, msg("Made soup and watched a film.", turn="t1"))
    assert "illness" in state.conditions
    go = "still going to training tonight and racing saturday no matter what"
    _, p = assess(state, None, msg(go, turn="t2"))
    assert "train_while_ill" in [b.step_id for b in p.blocked_steps]
    state, _ = assess(state, None, msg("Fever's gone since Tuesday, feeling human.", turn="t2"))
    assert "illness" not in state.conditions


def test_crisis_is_critical_escalated_and_followed_by_post_crisis() -> None:
    state, p = assess(None, None, msg("I want to kill myself.", turn="t0"))
    assert p.overall == "critical"
    assert p.crisis.escalated
    assert p.risks[0].risk_id == "crisis:suicidal_ideation"
    state, p = assess(state, None, msg("I'm a bit better now.", turn="t1"))
    assert p.post_crisis
    assert p.turns_since_crisis == 1
    state, p = assess(state, None, msg("Back to running.", turn="t2"))
    assert not p.post_crisis


def test_abuse_blocks_confrontation_even_unasked() -> None:
    _, p = assess(None, None, msg("Mein Mann schlägt mich."))
    assert p.crisis.category is CrisisCategory.ABUSE
    assert "confront_abuser_alone" in {b.step_id for b in p.blocked_steps}


def test_no_contact_said_sets_no_standing_block_but_a_meeting_after_it_does() -> None:
    # A violent ex told, then every contact through the lawyer: no meeting is in play,
    # so no standing block of it that turn (conflicts dev round 20, own wording); the
    # reply guard keeps it out of replies via the remembered condition all the same.
    state, p = assess(None, None, msg("My ex was violent for years.", turn="t0"))
    assert "confront_abuser_alone" in {b.step_id for b in p.blocked_steps}
    state, p = assess(
        state,
        None,
        msg("My lawyer handles all contact now, I won't see him again.", turn="t1"),
    )
    assert "confront_abuser_alone" not in {b.step_id for b in p.blocked_steps}
    assert "confront_abuser_alone" in {g for g in p.guarded_steps}
    _, p = assess(state, None, msg("Going round on my own tonight to get my dog.", turn="t2"))
    assert "confront_abuser_alone" in {b.step_id for b in p.blocked_steps}


def test_redelivery_is_idempotent() -> None:
    m = msg("I'll stop taking my meds.")
    state, first = assess(SafetyState(user_id="u1"), None, m)
    again, second = assess(state, None, m)
    assert again is state
    assert again.version == state.version
    assert {b.step_id for b in second.blocked_steps} == {b.step_id for b in first.blocked_steps}


@pytest.mark.parametrize(
    ("cleared", "kept"),
    [
        ("The physio cleared me last week, so I'm going back to five days a week.", False),
        ("Knie ist verheilt, die Physio hat mich freigegeben. Dreimal die Woche Training?", False),
        # A negated all-clear clears nothing.
        ("It's not healed yet but I want to train five days a week.", True),
        ("Das Knie ist noch nicht verheilt, ich will trotzdem viermal die Woche spielen.", True),
    ],
)
def test_an_all_clear_forgets_the_injury_a_negated_one_does_not(cleared: str, kept: bool) -> None:
    state, _ = assess(None, None, msg("Sprained my ankle badly on Sunday.", turn="t1"))
    assert "injury" in state.conditions
    state, out = assess(state, None, msg(cleared, turn="t2"))
    assert ("injury" in state.conditions) is kept
    blocked = {b.step_id for b in out.blocked_steps} | set(out.guarded_steps)
    assert ("train_through_injury" in blocked) is kept


def test_an_all_clear_ends_the_block_that_rested_on_the_injury() -> None:
    state, _ = assess(
        None, None, msg("My knee is injured but I'll run every day anyway.", turn="t1")
    )
    assert "train_through_injury" in state.active_blocks
    state, out = assess(
        state, None, msg("The physio cleared me today, so what should I cook tonight?", turn="t2")
    )
    assert "train_through_injury" not in state.active_blocks
    assert "train_through_injury" not in {b.step_id for b in out.blocked_steps}


def test_a_step_told_as_safely_arranged_ends_the_block_an_earlier_turn_set() -> None:
    # "Come off it" told first blocks stopping the medication; the doctor's taper told
    # next is that step arranged safely, so the carried block ends (and the coach may
    # back the doctor's plan). Defied, the arrangement is no arrangement.
    state, _ = assess(None, None, msg("I want to come off my sertraline soon.", turn="t1"))
    assert "stop_medication" in state.active_blocks
    arranged = "My GP and I agreed a slow taper over ten weeks with a review each month."
    after, out = assess(state, None, msg(arranged, turn="t2"))
    assert "stop_medication" not in after.active_blocks
    assert "stop_medication" not in {b.step_id for b in out.blocked_steps}
    defied = "My GP wants a slow taper over ten weeks, but I'm stopping it all on Friday anyway."
    after, out = assess(state, None, msg(defied, turn="t2"))
    assert "stop_medication" in {b.step_id for b in out.blocked_steps}


def test_a_remembered_condition_guards_its_step_on_every_later_turn() -> None:
    # Told once, weeks of turns later a reply must still not suggest training hard.
    state, _ = assess(None, None, msg("My knee injury is acting up again."))
    state, later = assess(state, None, msg("What could I cook for friends on Saturday?"))
    assert later.blocked_steps == []
    assert later.guarded_steps == ["train_through_injury"]
    # A step blocked this turn is not listed twice.
    _, blocked = assess(state, None, msg("Knee or not, I'm running every day from tomorrow."))
    assert "train_through_injury" in {b.step_id for b in blocked.blocked_steps}
    assert "train_through_injury" not in blocked.guarded_steps
