"""Stability's deterministic tier: the risk frame of a turn.

For each message: the crisis screen (shared with Coach and Synth, in
coachbus.safety.screen), the risky steps the message heads toward given what we know
about the person (an injury, medication, an abusive partner), and the steps the
coach must not suggest. Blocked steps are remembered for a while: a user who
wanted to bet their savings on Monday should not hear "go all in" on Wednesday.

Each risk is framed FMEA-style: severity, detectability (5 = hardest to notice
in time) and reversibility (5 = hardest to undo), 1-5 each; their product is the
priority.
"""

from __future__ import annotations

from collections.abc import Sequence

from coachbus.contracts.events import UserMessage
from coachbus.contracts.payloads import (
    BlockedStep,
    CheckInAnswer,
    CrisisCategory,
    CrisisScreen,
    PatternClass,
    Risk,
    RiskLevel,
    StabilityPayload,
)
from coachbus.contracts.state import (
    MAX_CRISIS_EVENTS,
    ActiveBlock,
    Blackboard,
    CrisisEvent,
    SafetyState,
)
from coachbus.normalize import NormalizedText
from coachbus.safety.conversation import fold_turn, read_turn
from coachbus.safety.screen import crisis_risk, is_crisis, merge_screens, needs_check_in
from coachbus.safety.steps import (
    CATALOGUE,
    CONDITION_TTL,
    StepHit,
    condition_changes,
    endangered_by,
    keeps_no_contact,
    step_screen,
)

# How many turns a blocked step stays blocked after it was last triggered.
BLOCK_TTL = 20
# An older block still applies but with less certainty that the user is heading there.
CARRIED_CONFIDENCE = 0.7
# Priority (S x D x R) from which a risk alone makes the turn "high".
HIGH_PRIORITY = 60
# Confidence of a blocked step only an LLM tier found (its evidence was checked).
MODEL_STEP_CONFIDENCE = 0.7
# Patterns on the board that make a risky plan likelier to be carried out in full.
_AMPLIFIERS = (PatternClass.ALL_OR_NOTHING, PatternClass.OVERCOMMITMENT)


def assess(
    safety: SafetyState | None,
    board: Blackboard | None,
    msg: UserMessage,
    *,
    crisis: CrisisScreen | None = None,
    extra_steps: Sequence[tuple[str, str]] = (),
    said: NormalizedText | None = None,
) -> tuple[SafetyState, StabilityPayload]:
    """Screen one message and update (a copy of) the safety state; idempotent per turn.

    ``crisis`` and ``extra_steps`` ((step id, the user's words that show it)) come
    from an LLM tier; both can only add to the deterministic screen: the more
    alarming crisis screen wins and the regex's blocked steps always stay (safety is
    monotone; see merge_screens). ``said``: the message's text, normalised already
    (the handler normalises it once for every screen of the turn).
    """
    if said is None:
        said = NormalizedText.of(msg.text)
    base = safety if safety is not None else SafetyState(user_id=msg.user_id)
    # The message read in its conversation: an answer to the question our last reply
    # asked, or the sign that completes a warning pattern (coachbus.safety.conversation).
    reading = read_turn(safety, said, msg.turn_id, msg.created_at)
    crisis = merge_screens(reading.screen, crisis)
    if base.has_applied(msg.turn_id):
        screen = step_screen(said, _active_conditions(base, base.turn_count))
        return base, _payload(base, crisis, screen.hits, board, reading.answered, screen.confidence)

    s = base.model_copy(deep=True)
    s.turn_count += 1
    turn = s.turn_count
    s.last_session = msg.session_id

    revealed, cleared = condition_changes(said)
    for cond in revealed:
        s.conditions[cond] = turn + CONDITION_TTL[cond]
    for cond in cleared:
        # Said to be over ("the physio cleared me"): forgotten, so training again is
        # no longer read as training while injured, and a block carried from an earlier
        # turn that rested on it ends. Only explicit all-clears count.
        s.conditions.pop(cond, None)
        s.active_blocks = {
            k: v
            for k, v in s.active_blocks.items()
            if k not in CATALOGUE or CATALOGUE[k].needs_condition != cond
        }
    if crisis.category is CrisisCategory.ABUSE:
        s.conditions["abuse"] = turn + CONDITION_TTL["abuse"]
    conditions = _active_conditions(s, turn)
    s.conditions = {c: exp for c, exp in s.conditions.items() if exp >= turn}

    screen = step_screen(said, conditions)
    hits = list(screen.hits)
    found = {h.spec.step_id for h in hits}
    for step_id, evidence in extra_steps:
        if step_id in CATALOGUE and step_id not in found:
            found.add(step_id)
            hits.append(
                StepHit(CATALOGUE[step_id], f"model: {evidence}"[:80], MODEL_STEP_CONFIDENCE)
            )
    if (
        "abuse" in conditions
        and not any(h.spec.step_id == "confront_abuser_alone" for h in hits)
        and not keeps_no_contact(said.text)
    ):
        # With abuse disclosed, confronting the person alone is never a step to suggest,
        # whether or not the user raised it. Not on a turn where the person says they
        # will have no contact ("my solicitor handles it, I won't see him at all"):
        # there is no meeting in play to weigh against a push (conflicts dev round 20);
        # the reply guard still keeps the meeting out of every reply while the
        # condition is remembered (endangered_by).
        spec = CATALOGUE["confront_abuser_alone"]
        hits.append(StepHit(spec, "abuse disclosed", 0.8))
    # A block carried from an earlier turn ends when this message tells that step as
    # safely arranged ("saw my GP and we agreed a slow taper" after "I'd like to come
    # off it"): the person is no longer heading for it alone, and the coach may back
    # the doctor's plan. Only the step's own arrangement counts, and only without
    # defiance after it (StepSpec.arranged); a step heading here again is blocked
    # again by its trigger (conflicts dev, eleventh session: two doctor-led tapers
    # kept a block the first turn had set).
    for step_id in [k for k in s.active_blocks if k not in found and k in CATALOGUE]:
        if CATALOGUE[step_id].arranged(said.text):
            del s.active_blocks[step_id]
    for h in hits:
        s.active_blocks[h.spec.step_id] = ActiveBlock(
            step_id=h.spec.step_id,
            since_turn=turn,
            expires_turn=turn + BLOCK_TTL,
            session_id=msg.session_id,
            trigger=h.trigger[:80],
        )
        for cond in h.spec.reveals:
            s.conditions[cond] = turn + CONDITION_TTL.get(cond, BLOCK_TTL)
    s.active_blocks = {k: v for k, v in s.active_blocks.items() if v.expires_turn >= turn}

    if is_crisis(crisis):
        s.crisis_history.append(
            CrisisEvent(
                category=crisis.category,
                turn=turn,
                session_id=msg.session_id,
                confidence=crisis.confidence,
            )
        )
        del s.crisis_history[:-MAX_CRISIS_EVENTS]
    fold_turn(
        s,
        reading,
        crisis,
        turn=turn,
        turn_id=msg.turn_id,
        language=msg.language,
        now=msg.created_at,
    )
    s.mark_applied(msg.turn_id)
    return s, _payload(s, crisis, hits, board, reading.answered, screen.confidence)


def risk_confidence(payload: StabilityPayload) -> float:
    """Confidence of the crisis screen alone (the ``risk_screen`` decision): how often
    the screen's answer was right on labelled data. An uncertain screen (risk cues,
    no rule) reports a low one, so a model is asked whenever one is configured."""
    return payload.crisis.confidence


def steps_confidence(state: SafetyState, said: NormalizedText) -> float:
    """Confidence of this turn's blocked steps (the ``blocked_steps`` decision).

    Measured on the steps corpus's calibration split per kind of answer
    (coachbus.confidence): a step found clears the policy's bar; "no step" does not
    (the rules miss a third of the steps on new text), so a model, where one is
    configured, reads every message the rules found nothing in."""
    conditions = active_conditions(state)
    return step_screen(said, conditions).confidence


def active_conditions(s: SafetyState) -> set[str]:
    return _active_conditions(s, s.turn_count)


def _active_conditions(s: SafetyState, turn: int) -> set[str]:
    return {c for c, exp in s.conditions.items() if exp >= turn}


def _amplified(board: Blackboard | None) -> bool:
    if board is None:
        return False
    return any(
        (rec := board.patterns.get(p)) is not None and rec.occurrences >= 2 for p in _AMPLIFIERS
    )


def _payload(
    s: SafetyState,
    crisis: CrisisScreen,
    hits: list[StepHit],
    board: Blackboard | None,
    answered: CheckInAnswer | None = None,
    steps_sure: float = 0.0,
) -> StabilityPayload:
    """``steps_sure``: the step screen's measured confidence in its answer this turn
    (0.0, no certainty, when unknown)."""
    now = {h.spec.step_id: h for h in hits}
    amplified = _amplified(board)
    blocked: list[BlockedStep] = []
    risks: list[Risk] = []
    for step_id in sorted(
        set(now) | set(s.active_blocks),
        key=lambda k: -CATALOGUE[k].priority if k in CATALOGUE else 0,
    ):
        spec = CATALOGUE.get(step_id)
        if spec is None:
            continue  # a step id from an older catalogue version: nothing to police
        conf = now[step_id].confidence if step_id in now else CARRIED_CONFIDENCE
        blocked.append(spec.blocked(conf))
        risk = spec.risk()
        if amplified and step_id in now:
            # A known all-or-nothing / overcommitment pattern makes it likelier the
            # plan is carried out in full, before anyone notices.
            risk.detectability = min(5, risk.detectability + 1)
        risks.append(risk)
    if is_crisis(crisis):
        risks.insert(0, crisis_risk(crisis.category))

    overall: RiskLevel = "low"
    top = max((r.priority for r in risks), default=0)
    if is_crisis(crisis):
        overall = "critical" if crisis.confidence >= 0.5 else "high"
    elif needs_check_in(crisis):
        # Nobody has ruled a crisis out yet: never report this turn as low risk.
        overall = "moderate"
    elif top >= HIGH_PRIORITY and now:
        overall = "high"
    elif risks:
        overall = "moderate"

    if is_crisis(crisis) or needs_check_in(crisis):
        confidence = crisis.confidence
    elif now:
        confidence = max(h.confidence for h in hits)
    else:
        # Clean: as sure as the crisis screen's clean bucket and the step screen's
        # "no step", both measured.
        confidence = min(crisis.confidence, steps_sure)
    # The turn right after a crisis (its event was recorded on the previous turn).
    last = s.crisis_history[-1] if s.crisis_history else None
    post_crisis = not is_crisis(crisis) and last is not None and last.turn == s.turn_count - 1
    if post_crisis and overall == "low":
        overall = "moderate"
    return StabilityPayload(
        risks=risks,
        blocked_steps=blocked,
        crisis=crisis,
        overall=overall,
        post_crisis=post_crisis,
        turns_since_crisis=(s.turn_count - last.turn) if last is not None else None,
        answered_check_in=answered,
        confidence=round(confidence, 3),
        guarded_steps=[
            sid
            for sid in endangered_by(active_conditions(s))
            if sid not in {b.step_id for b in blocked}
        ],
    )
