"""Plasticity's deterministic tier: OCEAN -> communication preferences -> strategy.

The mapping is the table in docs/mapping.md; keep the two in step. Traits come
from Persona's stored profile through the same BFI-10 derivation Persona uses
(coachbus.ocean), shrunk toward the midpoint by their confidence: with little
evidence every preference sits near its neutral default, so a weak personality
guess cannot swing how we talk to someone.

Strategy is chosen by ordered rules: what the message shows right now (self-
criticism, ambivalence, a big decision, perfectionism, progress) beats the
remembered pattern, which beats trait-only rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from coachbus import ocean
from coachbus.contracts.events import UserMessage
from coachbus.contracts.payloads import (
    CoachingStrategy,
    CommunicationPreferences,
    PatternClass,
    PlasticityPayload,
    Trait,
)
from coachbus.contracts.state import Blackboard, PersonaProfile
from coachbus.text import (
    PROGRESS_RX,
    SETBACK_RX,
    Language,
    Register,
    extract_goals,
    sentences,
    words,
)


def _rx(p: str) -> re.Pattern[str]:
    return re.compile(p, re.I)


SELF_CRITICISM = _rx(
    r"(?:i'?m|i am) (?:so |such an? |just |a )?(?:lazy|useless|pathetic|failure|loser|hopeless)|"
    r"what'?s wrong with me|i always fail|i suck|ich bin (?:so |einfach |echt |ein )?"
    r"(?:faul|nutzlos|versager|hoffnungslos|zu blöd|zu dumm)|typisch ich|ich versage|"
    r"ich kriege? nichts hin"
)
AMBIVALENCE = _rx(
    r"part of me|i don'?t know (?:if|whether)|not sure (?:if|whether)|i know i should|"
    r"on the other hand|torn between|(?:should|could) but|ich weiß nicht,? ob|einerseits|"
    r"hin- und hergerissen|ein teil von mir|eigentlich sollte|eigentlich müsste"
)
BIG_DECISION = _rx(
    r"\bquit\w*|career|should i\b|what i really want|meaning|purpose|startup|"
    r"(?:my )?savings|life change|kündig\w*|soll ich\b|was ich wirklich will|\bsinn\b|"
    r"gründ\w*|ersparnis\w*|erspartes"
)
PERFECTIONISM = _rx(r"perfect\w*|not good enough|perfekt\w*|nicht gut genug")
HABIT = _rx(
    r"every (?:morning|evening|night)|routine|habit|after (?:breakfast|work|coffee|dinner)|"
    r"jeden (?:morgen|abend)|gewohnheit|routine|nach dem (?:frühstück|kaffee|abendessen)"
)


def _reports_progress(text: str) -> bool:
    # Same cues as Shadow's, setbacks first ("nicht geschafft" contains "geschafft").
    sents = sentences(text)
    return not any(SETBACK_RX.search(s) for s in sents) and bool(PROGRESS_RX.search(text))


@dataclass(frozen=True, slots=True)
class Traits:
    o: float
    c: float
    e: float
    a: float
    n: float


def traits_from_profile(profile: PersonaProfile | None) -> tuple[Traits, float]:
    """Shrunk trait values and the profile's mean confidence (0 with no profile)."""
    if profile is None:
        return Traits(0.5, 0.5, 0.5, 0.5, 0.5), 0.0
    est = ocean.derive_traits(profile.items)
    t = Traits(
        o=ocean.shrunk(est[Trait.OPENNESS]),
        c=ocean.shrunk(est[Trait.CONSCIENTIOUSNESS]),
        e=ocean.shrunk(est[Trait.EXTRAVERSION]),
        a=ocean.shrunk(est[Trait.AGREEABLENESS]),
        n=ocean.shrunk(est[Trait.NEUROTICISM]),
    )
    return t, ocean.mean_confidence(est)


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return round(max(lo, min(hi, x)), 3)


def preferences(
    t: Traits, msg_text: str, language: Language, register: Register
) -> CommunicationPreferences:
    """The mapping table of docs/mapping.md (d* = trait - 0.5 after shrinking)."""
    do, dc, de, da, dn = t.o - 0.5, t.c - 0.5, t.e - 0.5, t.a - 0.5, t.n - 0.5
    directness = _clamp(0.55 + 0.5 * dc + 0.3 * de - 0.5 * dn)
    structure = _clamp(0.50 + 0.7 * dc - 0.4 * do + 0.3 * dn)
    # Coaching is never cold: warmth has a floor.
    warmth = _clamp(0.60 + 0.5 * da + 0.5 * dn + 0.2 * de, lo=0.4)
    challenge = _clamp(0.45 + 0.5 * do + 0.4 * dc + 0.2 * de - 0.7 * dn)
    autonomy = _clamp(0.60 + 0.5 * do - 0.2 * dc - 0.2 * dn)

    length: Literal["short", "medium", "long"] = "medium"
    if t.n >= 0.6 or t.e >= 0.6:
        length = "short"  # anxious: less to take in; extraverted: punchy exchanges
    elif t.o >= 0.6 and t.n < 0.5:
        length = "long"  # curious and steady: room for the reasoning
    n_words = len(words(msg_text))
    if n_words < 8:
        length = "short"  # a three-word message does not want an essay back
    elif n_words > 90 and length == "short":
        length = "medium"
    return CommunicationPreferences(
        directness=directness,
        structure=structure,
        warmth=warmth,
        challenge=challenge,
        autonomy_support=autonomy,
        length=length,
        formality=register,
        reading_level=reading_level(msg_text, language, t.o),
    )


def reading_level(
    text: str, language: Language, openness: float = 0.5
) -> Literal["simple", "standard", "advanced"]:
    """Mirror the user's own writing: sentence length and share of long words."""
    toks = words(text)
    if not toks:
        return "standard"
    n_sent = max(1, len(sentences(text)))
    avg_len = len(toks) / n_sent
    long_cut = 12 if language == "de" else 9
    long_share = sum(1 for w in toks if len(w) >= long_cut) / len(toks)
    if avg_len < 8 and long_share < 0.08:
        return "simple"
    if avg_len >= 20 or long_share >= 0.18 or (openness >= 0.65 and avg_len >= 15):
        return "advanced"
    return "standard"


def choose_strategy(
    t: Traits, last_pattern: PatternClass | None, msg_text: str, language: Language, conf: float
) -> tuple[CoachingStrategy, str, float]:
    """Ordered rules (docs/mapping.md): message cues, then pattern, then traits."""
    has_goal = bool(extract_goals(msg_text, language))
    S = CoachingStrategy
    if SELF_CRITICISM.search(msg_text):
        return S.SELF_COMPASSION, "the message is self-critical", 0.75
    if AMBIVALENCE.search(msg_text):
        return S.MOTIVATIONAL_INTERVIEWING, "the message shows ambivalence", 0.7
    if BIG_DECISION.search(msg_text):
        return S.VALUES_CLARIFICATION, "a big, hard-to-undo decision is on the table", 0.7
    if PERFECTIONISM.search(msg_text) or last_pattern is PatternClass.PERFECTIONISM:
        return S.COGNITIVE_REFRAMING, "perfectionist standards are blocking action", 0.65
    if _reports_progress(msg_text):
        return S.SOLUTION_FOCUSED, "the user reports progress worth building on", 0.65
    if last_pattern in (PatternClass.AVOIDANCE, PatternClass.PROCRASTINATION):
        return S.IMPLEMENTATION_INTENTIONS, "known avoidance: fix when and where in advance", 0.6
    if last_pattern is PatternClass.ALL_OR_NOTHING:
        return S.COGNITIVE_REFRAMING, "all-or-nothing rules: reframe to a minimum version", 0.6
    if last_pattern is PatternClass.OVERCOMMITMENT:
        return S.VALUES_CLARIFICATION, "too many goals: choose by what matters most", 0.6
    if last_pattern is PatternClass.SELF_CRITICISM or t.n >= 0.62:
        return S.SELF_COMPASSION, "setbacks hit hard for this person", 0.4 + 0.4 * conf
    if HABIT.search(msg_text) or (has_goal and t.c < 0.45):
        return S.HABIT_STACKING, "anchor the goal to an existing routine", 0.45 + 0.3 * conf
    if has_goal:
        return S.IMPLEMENTATION_INTENTIONS, "a new goal: turn it into an if-then plan", 0.55
    if last_pattern is PatternClass.STEADY_PROGRESS:
        return S.SOLUTION_FOCUSED, "steady progress: amplify what works", 0.55
    return S.MOTIVATIONAL_INTERVIEWING, "no clear goal yet: explore with open questions", 0.35


def plan(
    profile: PersonaProfile | None, msg: UserMessage, board: Blackboard | None = None
) -> PlasticityPayload:
    """Preferences and strategy for this turn, from Persona's last stored profile.

    The remembered pattern is Shadow's, read from the board (``primary_pattern``)
    when Plasticity has a board view; without one, the copy Persona carries in its
    profile (the same value, a turn or two later)."""
    t, conf = traits_from_profile(profile)
    # Language and du/Sie were decided once where the message entered.
    lang: Language = msg.language
    register: Register
    if lang == "de":
        register = (
            msg.address
            or (profile.formality if profile is not None else None)
            or "formal"  # Sie until the user says otherwise: the safe default in German
        )
    else:
        register = "informal"
    last_pattern: PatternClass | None
    if board is not None:
        last_pattern = board.primary_pattern
    else:
        last_pattern = profile.last_pattern if profile is not None else None
    strategy, why, s_conf = choose_strategy(t, last_pattern, msg.text, lang, conf)
    return PlasticityPayload(
        language=lang,
        preferences=preferences(t, msg.text, lang, register),
        strategy=strategy,
        strategy_rationale=why,
        profile_confidence=conf,
        strategy_confidence=round(min(0.95, s_conf), 3),
    )
