"""Shadow's deterministic tier: the cross-session blackboard of one user.

``observe`` folds a message into the blackboard — stated goals with quotes, what
the user actually spends words and time on, progress and setbacks per goal, and
behaviour patterns from the fixed taxonomy in docs/patterns.md — and derives the
payload from the board alone, so a redelivered message yields the same payload.

Everything is bounded (caps in coachbus.contracts.state): the board is rewritten
on every turn and compaction keeps only the latest record per user.
"""

from __future__ import annotations

import math
import re

from coachbus.confidence import measured, pattern_outcome
from coachbus.contracts.events import UserMessage
from coachbus.contracts.payloads import (
    ActualPriority,
    FollowThroughPrediction,
    PatternClass,
    PatternEvidence,
    ShadowPayload,
    StatedGoal,
    TurnSignal,
)
from coachbus.contracts.state import (
    MAX_DOMAINS,
    MAX_GOALS,
    MAX_QUOTES,
    MAX_SESSIONS,
    QUOTE_CHARS,
    Blackboard,
    DomainRecord,
    GoalRecord,
    PatternRecord,
)
from coachbus.safety.screen import is_crisis, screen_crisis
from coachbus.text import (
    WORRY_RX,
    Language,
    content_stems,
    domains_of,
    extract_goals,
    jaccard,
    quote,
    sentences,
    word_count,
)
from services.shadow.cues import PATTERN_CUES, PROGRESS, SETBACK, TIME_SPENT

# Per-turn decay of a domain's weight: "actual priorities" describe the recent weeks,
# not everything the user ever said.
DOMAIN_DECAY = 0.93
# Patterns fade from "primary" when not seen for a while (per turn).
PATTERN_RECENCY = 0.9
PRIMARY_MIN_CONFIDENCE = 0.3
MAX_PRIORITIES = 5
MAX_PROGRESS_TURNS = 6
# A goal is "active" if mentioned within this many turns (for overcommitment).
ACTIVE_WINDOW = 12
OVERCOMMIT_ACTIVE_GOALS = 5

_SPECIFIC = re.compile(
    r"\d|\b(?:once|twice|three|four|five|times|per week|a week|each|every (?:morning|evening|"
    r"night|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekday)|minutes|pages|"
    r"words|km|miles|einmal|zweimal|dreimal|viermal|pro woche|jeden (?:morgen|abend|montag|"
    r"dienstag|mittwoch|donnerstag|freitag|samstag|sonntag)|minuten|seiten|wörter)\b",
    re.I,
)


# --------------------------------------------------------------------------- public


def observe(board: Blackboard | None, msg: UserMessage) -> tuple[Blackboard, ShadowPayload]:
    """Fold one message into (a copy of) the board; idempotent per turn id."""
    base = board if board is not None else Blackboard(user_id=msg.user_id)
    if base.has_applied(msg.turn_id):
        return base, payload_from_board(base)
    b = base.model_copy(deep=True)
    _apply(b, msg)
    b.primary_pattern = _primary(b)[0]
    b.mark_applied(msg.turn_id)
    return b, payload_from_board(b)


def refine(
    board: Blackboard, msg: UserMessage, claims: list[tuple[PatternClass, str]]
) -> tuple[Blackboard, ShadowPayload]:
    """Fold patterns an LLM tier found in ``msg`` into the board ``observe`` just
    produced for it: the same accounting as a cue match (one occurrence per
    pattern and turn, the quote as evidence), so both tiers build one history."""
    b = board.model_copy(deep=True)
    turn = b.turn_count
    for pattern, q in claims:
        _record_pattern(b, pattern, quote(q, QUOTE_CHARS), msg.session_id, turn)
    b.primary_pattern = _primary(b)[0]
    return b, payload_from_board(b)


def classification_confidence(board: Blackboard) -> float:
    """How often the rules' primary pattern (or "none yet") of this kind was right
    on conversations no rule was fitted to (the patterns corpus's calibration split,
    coachbus.confidence): what the router weighs against the policy's bar. The
    evidence-strength figure on the payload says how much the board has seen; this
    says how far to trust the rules' reading of it."""
    primary = board.primary_pattern
    outcome = pattern_outcome(primary.value if primary is not None else None)
    return measured("pattern_classification").of(outcome)


def is_crisis_message(msg: UserMessage) -> bool:
    """Nothing of a crisis message becomes pattern evidence (see ``_apply``)."""
    return is_crisis(screen_crisis(msg.text))


def payload_from_board(b: Blackboard) -> ShadowPayload:
    """The payload is a pure function of the board (so redelivery recomputes it)."""
    patterns = _pattern_evidence(b)
    primary, primary_conf = _primary(b)
    avoided = [g.goal_id for g in b.goals if _is_avoided(g)]
    return ShadowPayload(
        stated_goals=[
            StatedGoal(
                goal_id=g.goal_id,
                text=g.text,
                quote=g.quote,
                sessions_mentioned=g.session_count,
                first_seen_session=g.first_seen_session,
                domain=g.domain,
                progress_reports=g.progress,
                setback_reports=g.setbacks,
            )
            for g in b.goals
        ],
        actual_priorities=_priorities(b),
        avoided_goals=avoided,
        follow_through=[predict_follow_through(g, b) for g in b.goals],
        patterns=patterns,
        primary_pattern=primary,
        blackboard_version=b.version,
        confidence=primary_conf,
        focus_goal=b.last_focus_goal,
        signals=[TurnSignal(s) for s in b.last_signals],
        message_domains=list(b.last_domains),
    )


# --------------------------------------------------------------------------- folding a message


def _apply(b: Blackboard, msg: UserMessage) -> None:
    text = msg.text
    # Language and du/Sie were decided once where the message entered.
    lang: Language = msg.language
    if msg.address is not None:
        b.formality = msg.address
    session = msg.session_id
    if session not in b.sessions:
        b.sessions.append(session)
        del b.sessions[:-MAX_SESSIONS]
        b.session_count += 1
    b.turn_count += 1
    turn = b.turn_count

    sents = sentences(text)
    msg_domains = _update_domains(b, sents, turn)
    # A crisis message is not material for goals or pattern quotes: nothing from it
    # should ever be reflected back in a coaching reply.
    if is_crisis(screen_crisis(text)):
        b.last_focus_goal = None
        b.last_signals = [TurnSignal.NONE.value]
        b.last_domains = msg_domains
        return
    signals: list[TurnSignal] = []
    touched: list[str] = []

    # Goals stated in this message.
    stated = extract_goals(text, lang)
    for gm in stated:
        g = _find_goal(b, gm.goal_id, gm.stems, lang)
        if g is None:
            g = GoalRecord(
                goal_id=gm.goal_id,
                domain=gm.domain,
                text=gm.text,
                quote=gm.quote,
                first_seen_session=session,
                sessions=[session],
                last_turn=turn,
            )
            b.goals.append(g)
            signals.append(TurnSignal.NEW_GOAL)
        else:
            g.mentions += 1
            if session not in g.sessions:
                g.sessions.append(session)
                del g.sessions[:-MAX_SESSIONS]
                g.session_count += 1
                signals.append(TurnSignal.REPEATED_GOAL)
                if g.setbacks > g.progress:
                    # Re-announcing a goal in a new session after it stalled.
                    _record_pattern(b, PatternClass.RESTARTING, gm.quote, session, turn)
            # The user's latest wording is the goal as it stands now.
            g.text, g.quote, g.last_turn = gm.text, gm.quote, turn
        touched.append(g.goal_id)

    # Progress and setbacks, attributed per sentence to the goals they are about.
    reported: dict[str, TurnSignal] = {}
    for sent in sents:
        if SETBACK.search(sent) and not WORRY_RX.search(sent):
            kind = TurnSignal.SETBACK
        elif PROGRESS.search(sent):
            kind = TurnSignal.PROGRESS
        else:
            continue
        for g in _goals_for_sentence(b, sent, lang, stated_ids=touched):
            if g.goal_id in reported:
                continue  # one report per goal and message: a long rant is not five setbacks
            reported[g.goal_id] = kind
            q = quote(sent, QUOTE_CHARS)
            if kind is TurnSignal.PROGRESS:
                g.progress += 1
                g.progress_turns.append(turn)
                del g.progress_turns[:-MAX_PROGRESS_TURNS]
                if len(set(g.progress_turns)) >= 2 and g.progress >= g.setbacks:
                    _record_pattern(b, PatternClass.STEADY_PROGRESS, q, session, turn)
            else:
                g.setbacks += 1
                if g.setbacks >= 2 and g.setbacks >= g.progress + 2:
                    # Stated, and repeatedly not acted on: avoidance shown by behaviour,
                    # whatever words the user used.
                    _record_pattern(b, PatternClass.AVOIDANCE, q, session, turn)
            _add_quote(g.evidence, q)
            g.last_turn = turn
            if g.goal_id not in touched:
                touched.append(g.goal_id)
    for kind in (TurnSignal.PROGRESS, TurnSignal.SETBACK):
        if kind in reported.values():
            signals.append(kind)

    # Phrase-level patterns, at most one occurrence per pattern and message.
    seen: set[PatternClass] = set()
    for sent in sents:
        for pattern, rx in PATTERN_CUES.items():
            if pattern in seen or not rx.search(sent):
                continue
            seen.add(pattern)
            _record_pattern(b, pattern, quote(sent, QUOTE_CHARS), session, turn)

    # Overcommitment shown by structure: many goals at once or too many open at a time.
    active = [g for g in b.goals if turn - g.last_turn <= ACTIVE_WINDOW]
    new_goals = signals.count(TurnSignal.NEW_GOAL)
    if PatternClass.OVERCOMMITMENT not in seen and (
        len(stated) >= 3 or (new_goals and len(active) >= OVERCOMMIT_ACTIVE_GOALS)
    ):
        # Only a message that itself lists many goals is a quote showing the pattern;
        # "many goals open over weeks" has no single sentence to quote.
        q = stated[0].quote if len(stated) >= 3 else ""
        _record_pattern(b, PatternClass.OVERCOMMITMENT, q, session, turn)

    _cap_goals(b)
    b.last_focus_goal = _focus(b, touched, msg_domains)
    b.last_signals = [s.value for s in dict.fromkeys(signals)] or [TurnSignal.NONE.value]
    b.last_domains = msg_domains


def _update_domains(b: Blackboard, sents: list[str], turn: int) -> list[str]:
    for rec in b.domains.values():
        rec.weight = round(rec.weight * DOMAIN_DECAY, 4)
    mentioned: list[str] = []
    for sent in sents:
        domains = domains_of(sent)
        if not domains:
            continue
        w = word_count(sent) * (2.0 if TIME_SPENT.search(sent) else 1.0) / len(domains)
        for t in domains:
            rec = b.domains.setdefault(t, DomainRecord(domain=t))
            rec.weight = round(rec.weight + w, 4)
            rec.last_quote = quote(sent, QUOTE_CHARS)
            rec.last_turn = turn
            if t not in mentioned:
                rec.mentions += 1
                mentioned.append(t)
    if len(b.domains) > MAX_DOMAINS:
        keep = sorted(b.domains.values(), key=lambda r: r.weight, reverse=True)[:MAX_DOMAINS]
        b.domains = {r.domain: r for r in keep}
    return mentioned


def _find_goal(
    b: Blackboard, goal_id: str, stems: tuple[str, ...], lang: Language
) -> GoalRecord | None:
    for g in b.goals:
        if g.goal_id == goal_id:
            return g
    # Goals without a domain are keyed by their first words; match rewordings by overlap.
    best: tuple[float, GoalRecord | None] = (0.0, None)
    for g in b.goals:
        if g.domain is None:
            sim = jaccard(stems, content_stems(g.text, lang))
            if sim > best[0]:
                best = (sim, g)
    return best[1] if best[0] >= 0.5 else None


def _goals_for_sentence(
    b: Blackboard, sent: str, lang: Language, stated_ids: list[str]
) -> list[GoalRecord]:
    domains = set(domains_of(sent))
    hits = [g for g in b.goals if g.domain is not None and g.domain in domains]
    if not hits:
        stems = content_stems(sent, lang)
        hits = [
            g
            for g in b.goals
            if g.domain is None and jaccard(stems, content_stems(g.text, lang)) >= 0.3
        ]
    if not hits and len(stated_ids) == 1:
        hits = [g for g in b.goals if g.goal_id == stated_ids[0]]
    if not hits and b.last_focus_goal and word_count(sent) <= 12 and not domains:
        # "Didn't do it again." right after talking about a goal refers to that goal.
        hits = [g for g in b.goals if g.goal_id == b.last_focus_goal]
    return hits


def _record_pattern(b: Blackboard, pattern: PatternClass, q: str, session: str, turn: int) -> None:
    rec = b.patterns.get(pattern)
    if rec is None:
        rec = b.patterns[pattern] = PatternRecord(pattern=pattern)
    if rec.last_turn == turn and rec.occurrences:
        _add_quote(rec.evidence, q)
        return
    rec.occurrences += 1
    if rec.last_session != session:
        rec.session_count += 1
        rec.last_session = session
    rec.last_turn = turn
    _add_quote(rec.evidence, q)


def _add_quote(quotes: list[str], q: str) -> None:
    if q and q not in quotes:
        quotes.append(q)
        del quotes[:-MAX_QUOTES]


def _cap_goals(b: Blackboard) -> None:
    if len(b.goals) <= MAX_GOALS:
        return
    # Drop the goals the user has stopped talking about, keeping recurring ones longest.
    ranked = sorted(b.goals, key=lambda g: g.last_turn + 4 * g.session_count, reverse=True)
    keep = {g.goal_id for g in ranked[:MAX_GOALS]}
    b.goals = [g for g in b.goals if g.goal_id in keep]


def _focus(b: Blackboard, touched: list[str], msg_domains: list[str]) -> str | None:
    if touched:
        return touched[0]
    for t in msg_domains:
        for g in b.goals:
            if g.domain == t:
                return g.goal_id
    return None


# --------------------------------------------------------------------------- deriving the payload


def _is_avoided(g: GoalRecord) -> bool:
    return (g.setbacks >= 2 and g.setbacks > g.progress) or (
        g.session_count >= 2 and g.progress == 0 and g.setbacks >= 1
    )


def pattern_confidence(rec: PatternRecord) -> float:
    """Grows with occurrences and with the number of sessions they span, capped at 0.9."""
    strength = rec.occurrences + 0.5 * max(0, rec.session_count - 1)
    return round(min(0.9, 1.0 - math.exp(-strength / 2.5)), 3)


def _pattern_evidence(b: Blackboard) -> list[PatternEvidence]:
    out = [
        PatternEvidence(
            pattern=rec.pattern,
            confidence=pattern_confidence(rec),
            occurrences=rec.occurrences,
            evidence=list(rec.evidence),
            turns_since=max(0, b.turn_count - rec.last_turn),
        )
        for rec in b.patterns.values()
        if rec.occurrences > 0
    ]
    out.sort(key=lambda p: (p.confidence, p.occurrences), reverse=True)
    return out


def _primary(b: Blackboard) -> tuple[PatternClass | None, float]:
    """The user's primary pattern and its confidence: the one formula. Each sure
    enough pattern (confidence >= PRIMARY_MIN_CONFIDENCE) scores its confidence,
    faded by PATTERN_RECENCY per turn since it last showed, so a pattern shown now
    beats a larger one that has gone quiet. Stored on the board
    (``Blackboard.primary_pattern``) for every other agent to read."""
    best: tuple[float, PatternClass | None, float] = (0.0, None, 0.0)
    for rec in b.patterns.values():
        conf = pattern_confidence(rec)
        if conf < PRIMARY_MIN_CONFIDENCE:
            continue
        score = conf * PATTERN_RECENCY ** max(0, b.turn_count - rec.last_turn)
        if score > best[0]:
            best = (score, rec.pattern, conf)
    if best[1] is None:
        # "No pattern yet" is itself an uncertain call early on.
        return None, round(0.2 + 0.4 * min(1.0, b.turn_count / 10), 3)
    return best[1], best[2]


def _active(b: Blackboard, pattern: PatternClass) -> bool:
    rec = b.patterns.get(pattern)
    return rec is not None and pattern_confidence(rec) >= PRIMARY_MIN_CONFIDENCE


def predict_follow_through(g: GoalRecord, b: Blackboard) -> FollowThroughPrediction:
    """0-100 chance the user acts on the goal soon, with the reasons that moved it.

    Starts from the goal's own track record (Laplace-smoothed progress rate), then
    adjusts for the patterns that research on goal pursuit links to follow-through:
    specific plans help; overcommitment, all-or-nothing rules and chronic
    re-announcing hurt.
    """
    n = g.progress + g.setbacks
    p = 100.0 * (g.progress + 1) / (n + 2)
    reasons: list[str] = []
    if n:
        reasons.append(f"{g.progress} of {n} reports on this goal were progress")
    else:
        reasons.append("no progress or setback reported yet")
    if _SPECIFIC.search(g.text):
        p += 6
        reasons.append("the goal is specific (how often / how much)")
    else:
        p -= 4
        reasons.append("the goal is still vague")
    if _is_avoided(g):
        p -= 10
        reasons.append("repeatedly stated but not acted on")
    if g.session_count >= 3 and g.progress == 0:
        p -= 6
        reasons.append(f"announced in {g.session_count} sessions without progress")
    if _active(b, PatternClass.OVERCOMMITMENT):
        p -= 8
        reasons.append("many goals compete for the same time")
    if _active(b, PatternClass.ALL_OR_NOTHING):
        p -= 6
        reasons.append("all-or-nothing rules make one miss feel like failure")
    if _active(b, PatternClass.PERFECTIONISM):
        p -= 4
        reasons.append("perfectionism delays starting")
    if _active(b, PatternClass.STEADY_PROGRESS):
        p += 6
        reasons.append("steady progress across several check-ins")
    return FollowThroughPrediction(
        goal_id=g.goal_id,
        probability=max(5, min(95, round(p))),
        reasons=reasons,
        evidence=n,
    )


def _priorities(b: Blackboard) -> list[ActualPriority]:
    total = sum(r.weight for r in b.domains.values())
    if total <= 0:
        return []
    ranked = sorted(b.domains.values(), key=lambda r: r.weight, reverse=True)[:MAX_PRIORITIES]
    return [
        ActualPriority(domain=r.domain, share=round(r.weight / total, 3), evidence=r.last_quote)
        for r in ranked
    ]
