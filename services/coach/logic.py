"""Coach's deterministic tier: the short reply the user gets at once.

Coach never waits for this turn's other agents. It works from what is already
known — last turn's blackboard and safety state — plus its own screen of the new
message through the shared safety layer:

* a crisis gets the safe reply with help resources immediately, and no coaching;
* a message heading for a risky step gets acknowledgement and a safer first step;
* otherwise: one specific acknowledgement (progress, setback, new or returning
  goal, by domain) and one focused question chosen by the user's known pattern.

The fuller answer (pattern, plan, calibrated tone) comes from Synth afterwards, so
this reply stays at two or three sentences.
"""

from __future__ import annotations

from coachbus.contracts.events import UserMessage
from coachbus.contracts.payloads import CoachPayload, PatternClass
from coachbus.contracts.state import Blackboard, SafetyState
from coachbus.normalize import NormalizedText
from coachbus.safety.conversation import read_turn
from coachbus.safety.helplines import SHIPPED, Helplines
from coachbus.safety.replies import after_denial_reply, check_in_reply, crisis_reply
from coachbus.safety.screen import is_crisis, needs_check_in
from coachbus.safety.steps import CATALOGUE, endangered_by, screen_steps
from coachbus.text import (
    PROGRESS_RX,
    SETBACK_RX,
    Language,
    Register,
    domain_label,
    domains_of,
    extract_goals,
    find_markers,
    pick,
    seed_of,
    sentences,
)
from services.coach import phrases as P

# Turns after a crisis during which Coach stays in a gentle check-in mode: only the
# next one — after that, the user decides whether to return to their goals.
POST_CRISIS_TURNS = 1


def register_for(msg: UserMessage, board: Blackboard | None) -> Register:
    """du or Sie for this reply: the message's (decided where it entered), else the
    user's remembered preference on Shadow's board, else Sie (the safe default)."""
    if msg.language != "de":
        return "informal"
    return msg.address or (board.formality if board is not None else None) or "formal"


def quick_reply(
    msg: UserMessage,
    board: Blackboard | None,
    safety: SafetyState | None,
    *,
    helplines: Helplines = SHIPPED,
) -> CoachPayload:
    """``helplines``: the lines this service was configured with as it started."""
    lang: Language = msg.language
    reg = register_for(msg, board)
    seed = seed_of(msg.turn_id)
    grounded = ["message"]
    # Normalised once, for the crisis screen, the conversation and the step screen.
    said = NormalizedText.of(msg.text)

    # 1. Crisis: the safe reply at once, nothing else. The message is read in its
    # conversation: "ja" to the check-in our last reply asked is a crisis, and so is
    # the message that completes a warning pattern (coachbus.safety.conversation).
    reading = read_turn(safety, said, msg.turn_id, msg.created_at)
    screen = reading.screen
    if is_crisis(screen):
        return CoachPayload(
            text=crisis_reply(screen.category, lang, reg, helplines, asks=screen.asks),
            language=lang,
            crisis_mode=True,
            grounded_on=["crisis_screen"],
            confidence=screen.confidence,
            crisis=screen,
        )

    # 2. Risk cues no rule could read, or no clear answer to our check-in: ask
    # directly, at once. Coach cannot wait for Stability's model to settle it, and a
    # calm direct question costs little if the model later finds nothing; a missed
    # crisis costs a life (the protective choice).
    if needs_check_in(screen):
        return CoachPayload(
            text=check_in_reply(lang, reg, helplines, again=screen.question),
            language=lang,
            crisis_mode=True,
            grounded_on=["crisis_screen"],
            confidence=screen.confidence,
            crisis=screen,
        )
    # 3. A no to our check-in: believed, and a caring turn before any coaching.
    if reading.answered == "denied":
        return CoachPayload(
            text=after_denial_reply(lang, reg, helplines),
            language=lang,
            crisis_mode=True,
            grounded_on=["crisis_screen", "safety"],
            confidence=screen.confidence,
            crisis=screen,
        )

    # Steps to stay clear of: last turn's blocks plus what this message heads toward.
    conditions: set[str] = set()
    blocked_ids: list[str] = []
    if safety is not None:
        grounded.append("safety")
        conditions = {c for c, exp in safety.conditions.items() if exp >= safety.turn_count}
        blocked_ids = [
            b.step_id for b in safety.active_blocks.values() if b.expires_turn >= safety.turn_count
        ]
        recent = safety.crisis_history[-1] if safety.crisis_history else None
        after_crisis = recent is not None and safety.turn_count - recent.turn < POST_CRISIS_TURNS
        # "I'm safe" after a crisis reply, or a question asked as often as it may be
        # and still not answered: a gentle check-in, not coaching yet.
        if after_crisis or reading.answered in ("safe", "unclear"):
            return CoachPayload(
                text=P.POST_CRISIS.get(lang, reg),
                language=lang,
                crisis_mode=True,
                grounded_on=["safety", "crisis_history"],
                confidence=0.7,
                avoided_steps=_avoided(blocked_ids, conditions),
                crisis=screen,
            )
    hits = screen_steps(said, conditions)
    for h in hits:
        if h.spec.step_id not in blocked_ids:
            blocked_ids.append(h.spec.step_id)
    markers = [m for sid in blocked_ids if sid in CATALOGUE for m in CATALOGUE[sid].markers]

    msg_domains = domains_of(msg.text)
    goals = extract_goals(msg.text, lang)

    # 4. Heading for a risky step: acknowledge the drive, offer the safer first step.
    if hits:
        top = max(hits, key=lambda h: h.spec.priority)
        domain = goals[0].domain if goals else (msg_domains[0] if msg_domains else top.spec.domain)
        label = domain_label(domain)
        safer = top.spec.safer.get(lang, reg)
        text = " ".join(
            [
                pick(P.RISKY_OPEN, seed).fill(lang, reg, label),
                P.RISKY_STEP.fill(lang, reg, safer=safer),
            ]
        )
        return CoachPayload(
            text=_clean(text, markers, lang, reg),
            language=lang,
            crisis_mode=False,
            grounded_on=[*grounded, "risk_screen"],
            confidence=0.75,
            avoided_steps=_avoided(blocked_ids, conditions),
        )

    # 5. Ordinary turn: specific acknowledgement plus one focused question.
    known_goal = None
    if board is not None:
        grounded.append("blackboard")
        for g in board.goals:
            if (goals and g.goal_id == goals[0].goal_id) or (
                not goals and g.domain is not None and g.domain in msg_domains
            ):
                known_goal = g
                break
    domain = (
        goals[0].domain
        if goals
        else (msg_domains[0] if msg_domains else (known_goal.domain if known_goal else None))
    )
    label = domain_label(domain)
    setback = any(SETBACK_RX.search(s) for s in sentences(msg.text))
    progress = not setback and bool(PROGRESS_RX.search(msg.text))

    if domain is None and not goals:
        opener = pick(P.OPEN_GENERIC, seed).fill(lang, reg, label)
    elif setback and known_goal is not None and known_goal.setbacks >= 1:
        n = min(5, known_goal.setbacks + 1)
        opener = P.OPEN_SETBACK_AGAIN[0].fill(lang, reg, label, nth=P.ORDINALS[n])
    elif setback:
        opener = pick(P.OPEN_SETBACK, seed).fill(lang, reg, label)
    elif progress:
        opener = pick(P.OPEN_PROGRESS, seed).fill(lang, reg, label)
    elif goals and known_goal is not None:
        opener = pick(P.OPEN_REPEATED, seed).fill(lang, reg, label)
    elif goals:
        opener = pick(P.OPEN_NEW_GOAL, seed).fill(lang, reg, label)
    else:
        opener = pick(P.OPEN_NEUTRAL, seed).fill(lang, reg, label)

    # Shadow names the primary pattern on the board (last turn's, Coach never waits).
    pattern = board.primary_pattern if board is not None else None
    if progress and pattern is not PatternClass.STEADY_PROGRESS:
        question = P.QUESTION_BY_PATTERN[PatternClass.STEADY_PROGRESS][0]
    elif pattern is not None and pattern in P.QUESTION_BY_PATTERN:
        question = pick(P.QUESTION_BY_PATTERN[pattern], seed, 1)
    elif domain in P.QUESTION_BY_DOMAIN:
        question = P.QUESTION_BY_DOMAIN[domain]
    else:
        question = pick(P.QUESTION_GENERIC, seed, 2)
    text = f"{opener} {question.get(lang, reg)}"
    return CoachPayload(
        text=_clean(text, markers, lang, reg),
        language=lang,
        crisis_mode=False,
        grounded_on=grounded,
        confidence=0.65 if domain is not None else 0.45,
        avoided_steps=_avoided(blocked_ids, conditions),
    )


def _avoided(blocked: list[str], conditions: set[str]) -> list[str]:
    """The steps this reply must stay clear of: the blocks, and the steps the
    person's remembered conditions make dangerous (checked in any wording)."""
    return blocked + [s for s in endangered_by(conditions) if s not in blocked]


def _clean(text: str, markers: list[str], lang: Language, reg: Register) -> str:
    """Last guard: if any blocked-step marker slipped into the reply, fall back."""
    if markers and find_markers(text, markers):
        return pick(P.QUESTION_GENERIC, 0).get(lang, reg)
    return text
