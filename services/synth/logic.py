"""Synth's deterministic tier: merge, resolve conflicts, render, validate.

``build_sheet`` merges whatever results arrived into a DecisionSheet — what to
say, what never to say, tone, length, language — applying the conflict policy of
docs/mapping.md (services/synth/conflicts.py) and recording every conflict.

Missing agents degrade gracefully: without Stability, Synth runs the shared crisis
screen and risky-step screen on the message itself and stays conservative.

``render`` writes prose from the sheet alone; ``validate`` checks any prose (the
LLM's or ours) against the sheet; ``synthesize`` does all three and guarantees a
reply that passes the validator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.events import (
    AGENTS,
    AgentResult,
    CoachResult,
    Conflict,
    HumanReviewRequest,
    PersonaResult,
    PlasticityResult,
    ShadowResult,
    StabilityResult,
    UserMessage,
)
from coachbus.contracts.payloads import (
    BlockedStep,
    CheckInAnswer,
    CoachingStrategy,
    CrisisScreen,
    DecisionSheet,
    Language,
    PatternClass,
    PatternEvidence,
    Register,
    SheetGoal,
    SheetTone,
    TurnSignal,
)
from coachbus.normalize import NormalizedText
from coachbus.replycheck import check_reply
from coachbus.safety.helplines import SHIPPED, Helplines
from coachbus.safety.replies import after_denial_reply, check_in_reply, crisis_reply
from coachbus.safety.screen import (
    is_crisis,
    merge_screens,
    needs_check_in,
    review_severity,
    screen_crisis,
)
from coachbus.safety.steps import CATALOGUE, EVERY_CONDITION, screen_steps
from coachbus.text import (
    PROGRESS_RX,
    SETBACK_RX,
    Phrase,
    domains_of,
    extract_goals,
    find_markers,
    seed_of,
    sentences,
)
from services.synth import render as _render
from services.synth.conflicts import (
    AGAINST_STRETCH,
    SAFETY_MODES,
    Mode,
    crisis_first,
    evidence_over_guess_ambition,
    evidence_over_guess_follow_through,
    safety_over_ambition,
    safety_over_style,
)

# Word budgets per calibrated length (min, max).
LENGTH_WORDS: dict[str, tuple[int, int]] = {
    "short": (12, 75),
    "medium": (30, 130),
    "long": (50, 190),
}
CRISIS_WORDS = (35, 220)
# Turns after a crisis during which replies stay gentle (no hard forecasts, no
# raised challenge).
GENTLE_TURNS = 4
# Patterns a reply should only name once Shadow is reasonably sure.
PATTERN_MIN_CONFIDENCE = 0.3

_R = TypeVar("_R", ShadowResult, PersonaResult, PlasticityResult, StabilityResult, CoachResult)


class SynthOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    language: Language
    conflicts: list[Conflict] = Field(default_factory=list)
    sheet: DecisionSheet
    problems: list[str] = Field(default_factory=list)
    crisis_mode: bool = False
    degraded: bool = False
    # Confidence in the synthesis prose, for the router deciding on an LLM rewrite.
    confidence: float = Field(default=0.5, ge=0, le=1)


# --------------------------------------------------------------------------- sheet


def _get(results: Mapping[str, AgentResult], kind: type[_R]) -> _R | None:
    for r in results.values():
        if isinstance(r, kind):
            return r
    return None


def _safe_quote(q: str, markers: list[str]) -> bool:
    return (
        10 <= len(q) <= 110
        and not _ARTEFACT_IN_QUOTE.search(q)
        and not (markers and find_markers(q, markers))
        and not is_crisis(screen_crisis(q))
    )


# Patterns that belong to one goal: their quotes are only reflected back when they
# are about the goal in focus ("you said you'd restart running" is confusing when
# the user is talking about their novel).
_GOAL_BOUND = (
    PatternClass.AVOIDANCE,
    PatternClass.PROCRASTINATION,
    PatternClass.RESTARTING,
    PatternClass.STEADY_PROGRESS,
)
_NEGATIVE = frozenset(PatternClass) - {PatternClass.STEADY_PROGRESS}
# How recently a remembered pattern may be named on a setback or returning-goal turn.
PATTERN_MEMORY_TURNS = 8


# When several patterns show in one message, name the most specific, most
# actionable one: a thinking pattern the user can change beats a behavioural summary.
_SALIENCE: tuple[PatternClass, ...] = (
    PatternClass.SELF_CRITICISM,
    PatternClass.ALL_OR_NOTHING,
    PatternClass.PERFECTIONISM,
    PatternClass.OVERCOMMITMENT,
    PatternClass.AVOIDANCE,
    PatternClass.PROCRASTINATION,
    PatternClass.RESTARTING,
    PatternClass.STEADY_PROGRESS,
)


def _pattern_to_name(
    patterns: Sequence[PatternEvidence],
    primary: PatternClass | None,
    signal: TurnSignal,
    goal_on_track: bool = False,
) -> PatternEvidence | None:
    """Which pattern, if any, the reply should name this turn.

    A pattern is named when it is live: shown in this very message, or — on a
    setback or a returning goal — remembered from recent turns. Negative patterns
    are never brought up on a progress report, and steady progress only is.
    """
    sure = [p for p in patterns if p.confidence >= PATTERN_MIN_CONFIDENCE]
    if signal is TurnSignal.PROGRESS:
        return next((p for p in sure if p.pattern is PatternClass.STEADY_PROGRESS), None)
    live = [p for p in sure if p.turns_since == 0 and p.pattern in _NEGATIVE]
    if live:
        return min(live, key=lambda p: _SALIENCE.index(p.pattern))
    if signal is TurnSignal.SETBACK or (signal is TurnSignal.REPEATED_GOAL and not goal_on_track):
        recent = [
            p for p in sure if p.pattern in _NEGATIVE and p.turns_since <= PATTERN_MEMORY_TURNS
        ]
        by_primary = [p for p in recent if p.pattern is primary]
        pool = by_primary or recent
        if pool:
            return max(pool, key=lambda p: (p.confidence, -p.turns_since))
    return None


def _against_stretch(
    named: PatternClass | None, shadow: ShadowResult | None
) -> PatternClass | None:
    """Shadow's evidence against a stretch this turn: the pattern the reply names, or
    else the surest one of those arguing against a stretch seen in recent turns. A
    pattern not named (it is not live in this message) still tells Persona's guess
    what the person's record is: "I said yes to two more projects" two turns ago is
    overcommitment whatever this turn says."""
    if named in AGAINST_STRETCH or shadow is None:
        return named
    recent = [
        p
        for p in shadow.payload.patterns
        if p.pattern in AGAINST_STRETCH
        and p.confidence >= PATTERN_MIN_CONFIDENCE
        and p.turns_since <= PATTERN_MEMORY_TURNS
    ]
    if not recent:
        return named
    return max(recent, key=lambda p: (p.confidence, -p.turns_since)).pattern


def _pick_quote(
    pattern: PatternClass,
    evidence: Sequence[str],
    message: str,
    focus_domain: str | None,
    markers: list[str],
) -> str | None:
    """An earlier statement of the user's showing the pattern, if one fits.

    Never the message just sent (reflecting a pattern connects now to before), never
    one carrying a blocked step or crisis language, and for goal-bound patterns
    only one about the goal in focus.
    """
    here = message.strip()
    for q in reversed(evidence):
        if q in here or not _safe_quote(q, markers):
            continue
        if pattern in _GOAL_BOUND and (focus_domain is None or focus_domain not in domains_of(q)):
            continue
        return q
    return None


_ARTEFACT_IN_QUOTE = re.compile(r"[\[\]{}<>]|\b[a-z]+_[a-z_]+\b")


def build_sheet(
    msg: UserMessage,
    results: Mapping[str, AgentResult],
    missing: Sequence[str],
    *,
    helplines: Helplines = SHIPPED,
) -> DecisionSheet:
    """Deterministic merge of the turn's results plus the conflict policy.

    ``helplines``: the lines this service was configured with as it started (the
    sheet lists those a safety reply must carry)."""
    shadow = _get(results, ShadowResult)
    persona = _get(results, PersonaResult)
    plast = _get(results, PlasticityResult)
    stab = _get(results, StabilityResult)
    coach = _get(results, CoachResult)
    conflicts: list[Conflict] = []

    # Language: decided once where the message entered. du/Sie: Plasticity's call
    # (it knows the user's remembered preference), else the message's, else Sie.
    language: Language = msg.language
    register: Register
    if language != "de":
        register = "informal"
    elif plast is not None:
        register = plast.payload.preferences.formality
    else:
        register = msg.address or "formal"

    # Crisis: always also screen the message ourselves — a missed crisis is the one
    # failure we cannot afford, and the screen costs microseconds.
    # Stability's screen comes first: its model may have settled an uncertain one.
    # The message is normalised once, for this screen and the step screens below.
    said = NormalizedText.of(msg.text)
    own_screen = screen_crisis(said)
    # Without Stability, Coach's screen: it read the message in its conversation (a
    # "yes" to our check-in), which the message alone cannot show.
    fallback = coach.payload.crisis if coach is not None else None
    if stab is not None:
        # Stability's screen already holds the message's and adds the conversation
        # and the model; our own only guards against a crisis it lacks. (merge_screens
        # would let our clean screen "settle" Stability's uncertain one, as a model may:
        # an unclear answer to our check-in would lose its second ask.)
        crisis = (
            merge_screens(stab.payload.crisis, own_screen)
            if is_crisis(own_screen)
            else stab.payload.crisis
        )
    else:
        crisis = merge_screens(fallback, own_screen) if fallback is not None else own_screen
    answered = stab.payload.answered_check_in if stab is not None else None

    # What never to say: Stability's blocks; without Stability, our own screen of
    # the message plus whatever Coach (which saw last turn's safety state) avoided.
    never: dict[str, BlockedStep] = {}
    if stab is not None:
        for b in stab.payload.blocked_steps:
            never[b.step_id or b.step] = b
    else:
        for h in screen_steps(said):
            never[h.spec.step_id] = h.spec.blocked(h.confidence)
        if coach is not None:
            for sid in coach.payload.avoided_steps:
                if sid in CATALOGUE and sid not in never:
                    never[sid] = CATALOGUE[sid].blocked(0.7)
    heading_for_risk = any(
        b.step_id in CATALOGUE and CATALOGUE[b.step_id].heads_for(said, EVERY_CONDITION)
        for b in never.values()
    ) or (stab is not None and stab.payload.overall == "high")

    after_crisis = (
        (stab is not None and stab.payload.post_crisis)
        or (stab is None and coach is not None and coach.payload.crisis_mode)
        # A no to our check-in, "I'm safe", or a question left unanswered as often as
        # we ask it: a caring turn before any coaching.
        or answered in ("denied", "safe", "unclear")
    )
    mode: Mode
    if is_crisis(crisis):
        mode = "crisis"
    elif needs_check_in(crisis):
        mode = "check_in"
    elif after_crisis:
        mode = "care"
    elif heading_for_risk:
        mode = "safety"
    else:
        mode = "coach"

    # Style from Plasticity, with conservative defaults.
    if plast is not None:
        pr = plast.payload.preferences
        tone = SheetTone(
            warmth=pr.warmth,
            directness=pr.directness,
            challenge=pr.challenge,
            autonomy_support=pr.autonomy_support,
        )
        length, reading = pr.length, pr.reading_level
        strategy = plast.payload.strategy
    else:
        tone = SheetTone(warmth=0.7, directness=0.5, challenge=0.3, autonomy_support=0.7)
        length, reading = "medium", "standard"
        strategy = CoachingStrategy.MOTIVATIONAL_INTERVIEWING

    since = stab.payload.turns_since_crisis if stab is not None else None
    gentle = mode in SAFETY_MODES or (since is not None and since <= GENTLE_TURNS)
    _, found = crisis_first(mode, strategy=strategy if plast is not None else None)
    conflicts += found
    tone, found = safety_over_style(tone, mode, gentle, from_plasticity=plast is not None)
    conflicts += found

    # Focus goal, follow-through and pattern: Shadow's evidence.
    focus: SheetGoal | None = None
    signal = TurnSignal.NONE
    pattern: PatternClass | None = None
    pattern_occ = 0
    pattern_quote: str | None = None
    markers = [m for b in never.values() for m in b.markers]
    if shadow is not None:
        sp = shadow.payload
        domains = list(sp.message_domains)
        for s in (
            TurnSignal.SETBACK,
            TurnSignal.PROGRESS,
            TurnSignal.REPEATED_GOAL,
            TurnSignal.NEW_GOAL,
        ):
            if s in sp.signals:
                signal = s
                break
        goal = next((g for g in sp.stated_goals if g.goal_id == sp.focus_goal), None)
        if goal is not None:
            pred = next((f for f in sp.follow_through if f.goal_id == goal.goal_id), None)
            follow_through, found = evidence_over_guess_follow_through(goal.goal_id, pred, persona)
            focus = SheetGoal(
                goal_id=goal.goal_id,
                domain=goal.domain,
                text=goal.text,
                follow_through=follow_through,
                follow_through_source="shadow" if follow_through is not None else None,
                sessions=goal.sessions_mentioned,
                avoided=goal.goal_id in sp.avoided_goals,
            )
            conflicts += found
        on_track = goal is not None and goal.progress_reports >= max(1, goal.setback_reports)
        ev = _pattern_to_name(sp.patterns, sp.primary_pattern, signal, on_track)
        if ev is not None:
            pattern, pattern_occ = ev.pattern, ev.occurrences
            focus_domain = focus.domain if focus is not None else (domains[0] if domains else None)
            pattern_quote = _pick_quote(ev.pattern, ev.evidence, msg.text, focus_domain, markers)
    else:
        domains = domains_of(msg.text)
        if any(SETBACK_RX.search(s) for s in sentences(msg.text)):
            signal = TurnSignal.SETBACK
        elif PROGRESS_RX.search(msg.text):
            signal = TurnSignal.PROGRESS
        goals = extract_goals(msg.text, language)
        if goals:
            signal = signal if signal is not TurnSignal.NONE else TurnSignal.NEW_GOAL
            focus = SheetGoal(goal_id=goals[0].goal_id, domain=goals[0].domain, text=goals[0].text)
    # Persona's push for ambition, weighed against safety and evidence.
    stretch = False
    if persona is not None and persona.payload.stretch_goals:
        target = persona.payload.stretch_goals[0]
        # The first rule that drops the stretch records why, in the table's order.
        dropped, found = safety_over_ambition(target, never.values(), said)
        if not dropped:
            dropped, found = crisis_first(mode, stretch=target)
        if not dropped:
            dropped, found = evidence_over_guess_ambition(
                target, _against_stretch(pattern, shadow), shadow
            )
        conflicts += found
        if not dropped and (
            signal is TurnSignal.PROGRESS
            or (focus is not None and focus.goal_id == target and (focus.follow_through or 0) >= 60)
        ):
            # Ambition is welcome on a goal the evidence says is on track.
            stretch = True

    lo, hi = CRISIS_WORDS if mode in SAFETY_MODES else LENGTH_WORDS[length]
    if mode == "safety":
        hi += 40  # the safer alternative must fit even in a "short" reply
    present = [a for a in AGENTS if a in results]
    confidence = 0.9 if mode in SAFETY_MODES else round(0.45 + 0.05 * len(present), 3)
    return DecisionSheet(
        language=language,
        formality=register,
        reading_level=reading,
        length=length,
        min_words=lo,
        max_words=hi,
        tone=tone,
        strategy=strategy,
        mode=mode,
        crisis=crisis,
        resources=_resources(mode, crisis, language, register, helplines, answered),
        answered_check_in=answered if mode in SAFETY_MODES else None,
        focus_goal=focus,
        signal=signal,
        pattern=pattern if mode == "coach" else None,
        pattern_occurrences=pattern_occ,
        pattern_evidence=pattern_quote if mode == "coach" else None,
        message_domains=domains,
        stretch=stretch and mode == "coach" and not gentle,
        gentle=gentle,
        never_say=list(never.values()),
        guarded_steps=[
            sid
            for sid in (stab.payload.guarded_steps if stab is not None else [])
            if sid not in never
        ],
        conflicts=conflicts,
        missing=list(missing),
        seed=seed_of(msg.turn_id),
        confidence=confidence,
    )


# --------------------------------------------------------------------------- render / validate


def _resources(
    mode: str,
    crisis: CrisisScreen,
    language: Language,
    register: Register,
    helplines: Helplines,
    answered: CheckInAnswer | None = None,
) -> list[str]:
    """The help lines a reply of ``mode`` must carry (the validator checks them)."""
    if mode == "crisis":
        return helplines.lines(crisis.category, language, register)
    if mode == "care" and answered == "denied":
        return [helplines.lifeline(language, register)]
    if mode == "care":
        return [helplines.reminder(language, register)]
    if mode == "check_in":
        return [helplines.lifeline(language, register)]
    return []


def render(sheet: DecisionSheet, *, helplines: Helplines = SHIPPED) -> str:
    """Deterministic prose from the sheet alone (see services/synth/render.py)."""
    return _render.render(sheet, helplines=helplines)


def never_steps(sheet: DecisionSheet) -> list[str]:
    """Every catalogue step the reply must not suggest: this turn's blocks and the
    steps the person's remembered conditions make dangerous."""
    return [b.step_id for b in sheet.never_say if b.step_id] + list(sheet.guarded_steps)


def validate(text: str, sheet: DecisionSheet, *, helplines: Helplines = SHIPPED) -> list[str]:
    """Problems with a reply, judged against the sheet; empty means it may be sent.

    The one reply checker (coachbus.replycheck), which Coach uses too, plus what
    only the sheet knows: the help lines a crisis or check-in reply must carry
    (``helplines``: the lines the sheet was built with).
    """
    if not text.strip():
        return ["empty reply"]
    problems = check_reply(
        text,
        language=sheet.language,
        register=sheet.formality,
        never=never_steps(sheet),
        min_words=sheet.min_words,
        max_words=sheet.max_words,
    )
    if sheet.mode in ("care", "check_in") and not any(r in text for r in sheet.resources):
        problems.append(f"{sheet.mode} reply lacks its help line")
    if sheet.mode == "crisis":
        for number in helplines.required_numbers(sheet.crisis.category, sheet.language):
            if number not in text:
                problems.append(f"crisis reply lacks help line {number}")
    return problems


def review_without_stability(
    msg: UserMessage, outcome: SynthOutcome, missing: Sequence[str]
) -> HumanReviewRequest | None:
    """The human review Stability would have asked for, when Stability is missing.

    A crisis goes to a human at high or critical (as Stability's severity rule
    does), an uncertain screen at moderate; nothing else does."""
    if "stability" not in missing or outcome.sheet.mode not in ("crisis", "check_in"):
        return None
    severity = review_severity(outcome.sheet.crisis)
    if severity is None:
        return None
    return HumanReviewRequest(
        turn_id=msg.turn_id,
        session_id=msg.session_id,
        user_id=msg.user_id,
        decision="risk_screen",
        reason=f"Synth's crisis screen ({outcome.sheet.mode}); Stability did not report in time",
        severity=severity,
        excerpt=msg.text[:2000],
    )


def _minimal(sheet: DecisionSheet, helplines: Helplines) -> str:
    """The last fallback: only the essential parts, which never carry markers."""
    return _render.render(
        sheet.model_copy(update={"pattern": None, "pattern_evidence": None, "stretch": False}),
        helplines=helplines,
    )


_LAST_RESORT = Phrase(
    "Thanks for telling me. Before we decide anything, what matters most to you about this "
    "right now?",
    "Danke, dass du mir das erzählst. Bevor wir irgendetwas entscheiden: Was ist dir daran "
    "gerade am wichtigsten?",
    "Danke, dass Sie mir das erzählen. Bevor wir irgendetwas entscheiden: Was ist Ihnen "
    "daran gerade am wichtigsten?",
)


def _last_resort(sheet: DecisionSheet, helplines: Helplines) -> str:
    lang, reg = sheet.language, sheet.formality
    if sheet.mode == "crisis":
        return crisis_reply(sheet.crisis.category, lang, reg, helplines, asks=sheet.crisis.asks)
    if sheet.mode == "check_in":
        return check_in_reply(lang, reg, helplines, again=sheet.crisis.question)
    if sheet.mode == "care" and sheet.answered_check_in == "denied":
        return after_denial_reply(lang, reg, helplines)
    return " ".join([_LAST_RESORT.get(sheet.language, sheet.formality), *sheet.resources])


def synthesize(
    msg: UserMessage,
    results: Mapping[str, AgentResult],
    missing: Sequence[str],
    *,
    helplines: Helplines = SHIPPED,
) -> SynthOutcome:
    """``helplines``: the lines this service was configured with as it started; the
    validator of the prose that may replace the reply needs the same (``validate``)."""
    sheet = build_sheet(msg, results, missing, helplines=helplines)
    text = render(sheet, helplines=helplines)
    problems = validate(text, sheet, helplines=helplines)
    if problems:
        # Bounded deterministic repair: drop the optional, user-derived parts.
        text = _minimal(sheet, helplines)
        problems = validate(text, sheet, helplines=helplines)
    if problems and sheet.mode not in SAFETY_MODES:
        # Still failing (e.g. a tiny word budget): widen the budget rather than send
        # something unsafe; the safety-relevant checks are unaffected by this.
        sheet = sheet.model_copy(update={"min_words": 0, "max_words": max(sheet.max_words, 220)})
        problems = validate(text, sheet, helplines=helplines)
    if problems:
        # Last resort: a reply built only from fixed, pre-checked sentences, so a
        # defect in the phrase library can never ship a blocked step or an artefact.
        text = _last_resort(sheet, helplines)
        problems = validate(text, sheet.model_copy(update={"min_words": 0}), helplines=helplines)
    return SynthOutcome(
        text=text,
        language=sheet.language,
        conflicts=list(sheet.conflicts),
        sheet=sheet,
        problems=problems,
        crisis_mode=sheet.mode in SAFETY_MODES,
        degraded=bool(missing),
        confidence=sheet.confidence if not problems else 0.2,
    )
