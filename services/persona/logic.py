"""Persona's deterministic tier: a slowly accumulating picture of the person.

OCEAN is scored item by item on the BFI-10 from what the user says about
themselves (coachbus.ocean), accumulated across sessions with confidence that
grows with evidence and saturates well below 1. It is a prior for *how* to talk
to someone, never a reason to override safety (Synth enforces that).

Persona also tracks recurring goals (stated in two or more sessions), a
follow-through percentage (a trait-based guess, blended with Shadow's evidence as
it arrives), and growth opportunities — including the "stretch" it would push
for, which Synth weighs against Stability's blocked steps.
"""

from __future__ import annotations

import re
from typing import Literal

from coachbus import content, ocean
from coachbus.contracts.events import UserMessage
from coachbus.contracts.payloads import (
    PLAN_IN_PLAY,
    PatternClass,
    PersonaPayload,
    Trait,
    TraitEstimate,
)
from coachbus.contracts.state import MAX_SESSIONS, Blackboard, PersonaProfile
from coachbus.text import (
    DOMAIN_LABELS,
    FOLLOW_THROUGH_RX,
    PROGRESS_RX,
    SETBACK_RX,
    Language,
    domains_of,
    extract_goals,
)

MAX_TRACKED_GOALS = 16
GOAL_SESSIONS_KEPT = 8
# Trait levels (after shrinking toward 0.5 by confidence) that count as "high"/"low".
HIGH = 0.57
LOW = 0.43


def _record_cues() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    doc = content.read("services.persona.content", "record.toml")
    keys = ("ambition", "goal_stated", "kept")
    content.only(doc, doc.raw, keys, "")
    ambition, stated, kept = (
        re.compile(
            content.pattern(doc, "|".join(content.texts(doc, doc.raw.get(k), k)), k, re.I),
            re.I,
        )
        for k in keys
    )
    return ambition, stated, kept


# The user's own reach for something big (read as readiness to stretch), a goal
# stated with intent (part of the record of ambition, not a stretch by itself), and a
# plan kept in words Shadow's progress cues do not carry (Persona's own reading).
_AMBITION, _GOAL_STATED, _KEPT = _record_cues()


def observe(
    profile: PersonaProfile | None,
    board: Blackboard | None,
    msg: UserMessage,
    *,
    cues: list[ocean.ItemCue] | None = None,
) -> tuple[PersonaProfile, PersonaPayload]:
    """Fold one message into (a copy of) the profile; idempotent per turn id.

    ``cues`` are item readings from an LLM tier; without them the cue phrases
    score the message. Either way the same accounting applies."""
    base = profile if profile is not None else PersonaProfile(user_id=msg.user_id)
    if base.has_applied(msg.turn_id):
        return base, build_payload(base, board, None)
    p = base.model_copy(deep=True)
    # Language and du/Sie were decided once where the message entered.
    lang: Language = msg.language
    if msg.address is not None:
        p.formality = msg.address
    if msg.session_id not in p.sessions:
        if p.session_count:
            ocean.decay(p.items)
        p.sessions.append(msg.session_id)
        del p.sessions[:-MAX_SESSIONS]
        p.session_count += 1
    p.turns_seen += 1
    ocean.apply_cues(p.items, ocean.score_items(msg.text) if cues is None else cues)

    for gm in extract_goals(msg.text, lang):
        seen = p.goal_sessions.setdefault(gm.goal_id, [])
        if msg.session_id not in seen:
            seen.append(msg.session_id)
            del seen[:-GOAL_SESSIONS_KEPT]
    if len(p.goal_sessions) > MAX_TRACKED_GOALS:
        # Keep the goals seen in most sessions; one-off mentions go first.
        keep = sorted(p.goal_sessions.items(), key=lambda kv: len(kv[1]), reverse=True)
        p.goal_sessions = dict(keep[:MAX_TRACKED_GOALS])

    reach = bool(_AMBITION.search(msg.text))
    if reach or _GOAL_STATED.search(msg.text):
        p.ambition_turns += 1
    if reach:
        p.reach_turns += 1
    # Persona's own phrases of a plan kept count even where a setback word appears
    # ("zero missed gym days" says "missed"); Shadow's broader cues only without one.
    if _KEPT.search(msg.text) or (
        not SETBACK_RX.search(msg.text)
        and (FOLLOW_THROUGH_RX.search(msg.text) or PROGRESS_RX.search(msg.text))
    ):
        p.kept_turns += 1
    if board is not None:
        # Shadow names the primary pattern on the board; Persona only carries it.
        p.last_pattern = board.primary_pattern
        p.progress_reports = sum(g.progress for g in board.goals)
        p.setback_reports = sum(g.setbacks for g in board.goals)
    p.mark_applied(msg.turn_id)
    return p, build_payload(p, board, msg)


def build_payload(
    p: PersonaProfile, board: Blackboard | None, msg: UserMessage | None
) -> PersonaPayload:
    traits = ocean.derive_traits(p.items)
    recurring = recurring_goals(p, board)
    pct, basis = follow_through(traits, p, board)
    growth, stretch = growth_opportunities(traits, p, board, msg, recurring)
    return PersonaPayload(
        ocean=traits,
        items=ocean.item_scores(p.items),
        recurring_goals=recurring,
        follow_through_pct=pct,
        growth_opportunities=growth,
        sessions_seen=p.session_count,
        follow_through_basis=basis,
        stretch_goals=stretch,
        confidence=ocean.mean_confidence(traits),
    )


def recurring_goals(p: PersonaProfile, board: Blackboard | None) -> list[str]:
    """Goal ids stated in two or more sessions (own tracking, plus Shadow's board)."""
    out = [gid for gid, sess in p.goal_sessions.items() if len(sess) >= 2]
    if board is not None:
        out.extend(g.goal_id for g in board.goals if g.session_count >= 2)
    return list(dict.fromkeys(out))


def follow_through(
    traits: dict[Trait, TraitEstimate], p: PersonaProfile, board: Blackboard | None
) -> tuple[float | None, Literal["prior", "blended", "evidence"] | None]:
    """A guess from conscientiousness, pulled toward the observed rate as evidence grows.

    With no evidence this is only a trait-based prior; Synth lets Shadow's
    per-goal evidence overrule it when the two disagree.
    """
    c = ocean.shrunk(traits.get(Trait.CONSCIENTIOUSNESS))
    n_ = ocean.shrunk(traits.get(Trait.NEUROTICISM))
    prior = 100.0 * (0.30 + 0.50 * c - 0.10 * (n_ - 0.5))
    if board is not None:
        prog = sum(g.progress for g in board.goals)
        setb = sum(g.setbacks for g in board.goals)
    else:
        prog, setb = p.progress_reports, p.setback_reports
    n = prog + setb
    if n == 0:
        if p.turns_seen == 0:
            return None, None
        return round(prior, 1), "prior"
    observed = 100.0 * (prog + 0.5) / (n + 1)
    w = n / (n + 4.0)
    pct = w * observed + (1 - w) * prior
    return round(max(0.0, min(100.0, pct)), 1), ("evidence" if w >= 0.75 else "blended")


def _label(goal_id: str) -> str:
    lab = DOMAIN_LABELS.get(goal_id)
    return lab.en if lab else goal_id.removeprefix("goal:").replace("-", " ")


def growth_opportunities(
    traits: dict[Trait, TraitEstimate],
    p: PersonaProfile,
    board: Blackboard | None,
    msg: UserMessage | None,
    recurring: list[str],
) -> tuple[list[str], list[str]]:
    """Plain-language growth notes plus the goal ids Persona would stretch."""
    o = ocean.shrunk(traits.get(Trait.OPENNESS))
    c = ocean.shrunk(traits.get(Trait.CONSCIENTIOUSNESS))
    e = ocean.shrunk(traits.get(Trait.EXTRAVERSION))
    a = ocean.shrunk(traits.get(Trait.AGREEABLENESS))
    n = ocean.shrunk(traits.get(Trait.NEUROTICISM))
    notes: list[str] = []
    stretch: list[str] = []

    # The goal in play now: stated in this message, else Shadow's focus.
    current: str | None = None
    if msg is not None:
        goals = extract_goals(msg.text, msg.language)
        if goals:
            current = goals[0].goal_id
        else:
            domains = domains_of(msg.text)
            current = domains[0] if domains and domains[0] in p.goal_sessions else None
    if current is None and board is not None:
        current = board.last_focus_goal

    progress_on: dict[str, int] = {}
    stalled: set[str] = set()
    if board is not None:
        for g in board.goals:
            progress_on[g.goal_id] = g.progress
            if g.setbacks >= 2 and g.setbacks > g.progress:
                stalled.add(g.goal_id)

    for gid in recurring:
        if gid in stalled:
            notes.append(f"shrink {_label(gid)} to a ten-minute version that cannot fail")

    ambitious_now = msg is not None and bool(_AMBITION.search(msg.text))
    # A record of ambition and follow-through (said big things, reported progress):
    # Persona pushes for the plan in play even when this turn names no goal, so a
    # risky step on it meets Stability's block (safety_over_ambition).
    # So does a person who said they reach high ("I always aim high"): Persona's guess
    # is the stretch, and Shadow's evidence (overcommitment, all-or-nothing…) or
    # Stability's block is what overrules it; Synth lets a stretch through only on a
    # goal that is on track, so the guess alone never reaches the reply.
    # A plan kept is a record of its own, said or not ("16 weeks, not one long run
    # skipped"), except for an anxious person: one good report is not yet a reason to
    # push them.
    record = (
        (p.ambition_turns >= 1 and p.kept_turns >= 1)
        or p.reach_turns >= 1
        or (p.kept_turns >= 1 and n < HIGH)
    )
    if current is None and record and msg is not None:
        domains = domains_of(msg.text)
        # With a record and no domain named (a novel, a show, "the plan"), the push
        # is on the plan in play: Synth's safety_over_ambition then weighs it against
        # a step the person is heading for this turn, whatever its domain.
        current = domains[0] if domains else next(iter(p.goal_sessions), PLAN_IN_PLAY)
    if current is not None and (
        record
        or (ambitious_now and (o >= 0.5 or c >= 0.5))
        or ((o >= HIGH or c >= HIGH) and progress_on.get(current, 0) >= 1)
    ):
        notes.append(f"stretch {_label(current)}: a bolder, visible commitment")
        stretch.append(current)
    if o >= HIGH:
        notes.append("experiment with a new approach rather than repeating the old plan")
    if c >= HIGH:
        notes.append("use the planning strength: write the when and where down")
    elif c <= LOW:
        notes.append("lean on cues and routines rather than willpower")
    if n >= HIGH:
        notes.append("treat setbacks with self-compassion instead of self-criticism")
    if e >= HIGH:
        notes.append("make the goal social: a partner or group to report to")
    elif e <= LOW:
        notes.append("keep commitments private and written rather than public")
    if a >= HIGH:
        notes.append("ask the people close to them for concrete support")

    pattern = p.last_pattern
    by_pattern = {
        PatternClass.PERFECTIONISM: "practise deliberately 'good enough' first drafts",
        PatternClass.AVOIDANCE: "name the avoided first step and make it tiny",
        PatternClass.PROCRASTINATION: "start inside the next 24 hours, even for five minutes",
        PatternClass.ALL_OR_NOTHING: "define a minimum version for bad days",
        PatternClass.OVERCOMMITMENT: "choose one priority for the next two weeks",
        PatternClass.SELF_CRITICISM: "describe setbacks as data, not as character",
        PatternClass.RESTARTING: "plan the restart after a miss before the miss happens",
        PatternClass.STEADY_PROGRESS: "protect the routine that is working",
    }
    if pattern is not None:
        notes.append(by_pattern[pattern])
    return list(dict.fromkeys(notes))[:6], stretch
