"""Deterministic prose from a DecisionSheet (the fallback the LLM prose must beat).

The reply is assembled from parts in a fixed order — acknowledgement, safety
redirect, pattern observation, calibrated follow-through note, one concrete step
chosen by strategy and domain, an optional stretch, a closing question — and each
part is a hand-written sentence in English, German-du and German-Sie. Specificity
comes from the sheet (domain, signal, pattern, the user's own short quote, the
safer alternative), not from pasting the user's message back.

The sentences are data beside this module (services/synth/content/render.toml and
domain_steps.toml), loaded once at import into Phrases and checked there: every
group is present and each sentence uses only the placeholders filled for it
(``Phrase.fill``, the same vocabulary as Coach's).

Parts are dropped or added to hit the sheet's word budget, and any sentence that
would contain a blocked step's marker is skipped, so the rendering cannot leak a
step Stability blocked.
"""

from __future__ import annotations

from dataclasses import dataclass

from coachbus import content
from coachbus.content.phrases import DOMAIN, NONE, keyed, phrase, variants
from coachbus.contracts.payloads import (
    CoachingStrategy,
    DecisionSheet,
    PatternClass,
    TurnSignal,
)
from coachbus.safety.helplines import Helplines
from coachbus.safety.replies import after_denial_reply, check_in_reply, crisis_reply
from coachbus.safety.steps import CATALOGUE
from coachbus.text import DOMAIN_ORDER, Phrase, domain_label, find_markers, pick, word_count

_PKG = "services.synth.content"

# --------------------------------------------------------------------------- per-domain content


@dataclass(frozen=True, slots=True)
class DomainSteps:
    # First-person plan sentences are the same for du and Sie, which is why the
    # German variants are written as the user's own words.
    if_then: Phrase
    anchor: Phrase  # habit stacking: "After my morning coffee, I …"
    rough: Phrase  # a deliberately small or imperfect version
    stretch: Phrase  # raising the bar when things go well


def _domain_steps(doc: content.Doc, value: object, at: str) -> DomainSteps:
    fields = ("if_then", "anchor", "rough", "stretch")
    found = keyed(doc, value, at, fields, phrase)
    return DomainSteps(*(found[f] for f in fields))


_STEPS_DOC = content.read(_PKG, "domain_steps.toml")
_domains = dict(_STEPS_DOC.raw)
GENERIC_STEPS = _domain_steps(_STEPS_DOC, _domains.pop("generic", None), "generic")
# Domains without steps of their own (none yet for music, mindfulness, substances)
# get the generic ones.
DOMAIN_STEPS: dict[str, DomainSteps] = keyed(
    _STEPS_DOC, _domains, "", DOMAIN_ORDER, _domain_steps, every=False
)


def _steps(domain: str | None) -> DomainSteps:
    return DOMAIN_STEPS.get(domain or "", GENERIC_STEPS)


# --------------------------------------------------------------------------- sentence library

_DOC = content.read(_PKG, "render.toml")
_GROUPS = (
    *("ack", "safety", "pattern", "quote_back", "follow_through", "step", "stretch"),
    *("reframe", "question", "care"),
)
content.only(_DOC, _DOC.raw, _GROUPS, "")
_PATTERNS = tuple(p.value for p in PatternClass)
_STRATEGIES = tuple(s.value for s in CoachingStrategy)


def _group(name: str) -> dict[str, object]:
    return content.table(_DOC, _DOC.raw.get(name), name)


_acks = dict(_group("ack"))
# Without a domain there is no label to name.
ACK_GENERIC = variants(_DOC, _acks.pop("generic", None), "ack.generic", NONE)
_ack = keyed(
    _DOC,
    _acks,
    "ack",
    (s.value for s in TurnSignal),
    lambda d, v, at: variants(d, v, at, DOMAIN),
)
ACK: dict[TurnSignal, tuple[Phrase, ...]] = {s: _ack[s.value] for s in TurnSignal}

_safety = _group("safety")
content.only(_DOC, _safety, ("intro", "safer", "safer_more", "question"), "safety")
_intro = keyed(_DOC, _safety.get("intro"), "safety.intro", ("venture", "health"), variants)
SAFETY_INTRO = _intro["venture"]
# Health-related blocks (medication, injury, diet, sleep) need a different opening
# than a risky venture: the drive to feel better is met with care, not strategy.
SAFETY_INTRO_HEALTH = _intro["health"]
SAFER = phrase(_DOC, _safety.get("safer"), "safety.safer", DOMAIN | {"safer"})
SAFER_MORE = phrase(_DOC, _safety.get("safer_more"), "safety.safer_more", DOMAIN | {"safer"})
# The closing question by the first blocked step, else the generic one.
_questions = dict(content.table(_DOC, _safety.get("question"), "safety.question"))
SAFETY_QUESTION = phrase(_DOC, _questions.pop("generic", None), "safety.question.generic")
SAFETY_QUESTIONS: dict[str, Phrase] = keyed(
    _DOC, _questions, "safety.question", CATALOGUE, phrase, every=False
)

_care = keyed(_DOC, _group("care"), "care", ("open", "middle", "question"), phrase)
CARE_OPEN, CARE_MIDDLE, CARE_QUESTION = _care["open"], _care["middle"], _care["question"]

PATTERN: dict[PatternClass, Phrase] = {
    PatternClass(k): v
    for k, v in keyed(
        _DOC, _group("pattern"), "pattern", _PATTERNS, lambda d, v, at: phrase(d, v, at, DOMAIN)
    ).items()
}
QUOTE_BACK = phrase(_DOC, _DOC.raw.get("quote_back"), "quote_back", DOMAIN | {"quote"})

_follow = keyed(_DOC, _group("follow_through"), "follow_through", ("low", "high"), phrase)
FOLLOW_LOW, FOLLOW_HIGH = _follow["low"], _follow["high"]

STEP_INTRO: dict[CoachingStrategy, Phrase] = {
    CoachingStrategy(k): v
    for k, v in keyed(
        _DOC,
        _group("step"),
        "step",
        _STRATEGIES,
        lambda d, v, at: phrase(d, v, at, DOMAIN | {"step"}),
    ).items()
}
STRETCH = phrase(_DOC, _DOC.raw.get("stretch"), "stretch", DOMAIN | {"stretch"})

QUESTION: dict[CoachingStrategy, tuple[Phrase, ...]] = {
    CoachingStrategy(k): v
    for k, v in keyed(_DOC, _group("question"), "question", _STRATEGIES, variants).items()
}

# Reframes for cognitive reframing, by pattern (first-person-free, register-neutral);
# None: the generic one.
_reframes = dict(_group("reframe"))
REFRAME: dict[PatternClass | None, Phrase] = {
    None: phrase(_DOC, _reframes.pop("generic", None), "reframe.generic")
}
REFRAME.update(
    (PatternClass(k), v)
    for k, v in keyed(_DOC, _reframes, "reframe", _PATTERNS, phrase, every=False).items()
)


# --------------------------------------------------------------------------- assembly


def _domain(sheet: DecisionSheet) -> str | None:
    if sheet.focus_goal is not None and sheet.focus_goal.domain is not None:
        return sheet.focus_goal.domain
    return sheet.message_domains[0] if sheet.message_domains else None


def _step(sheet: DecisionSheet, domain: str | None) -> Phrase:
    steps = _steps(domain)
    strategy = sheet.strategy
    if strategy is CoachingStrategy.IMPLEMENTATION_INTENTIONS:
        return steps.if_then
    if strategy is CoachingStrategy.HABIT_STACKING:
        return steps.anchor
    if strategy is CoachingStrategy.COGNITIVE_REFRAMING:
        return REFRAME[sheet.pattern if sheet.pattern in REFRAME else None]
    return steps.rough


@dataclass(slots=True)
class _Part:
    key: str
    text: str
    essential: bool


def parts(sheet: DecisionSheet) -> list[_Part]:
    """All candidate sentences for this sheet, in reading order."""
    domain = _domain(sheet)
    label = domain_label(domain)
    seed = sheet.seed
    lang, reg = sheet.language, sheet.formality
    out: list[_Part] = []

    # Acknowledgement (on a risky turn the safety intro acknowledges instead).
    if sheet.mode == "safety":
        pass
    elif domain is None:
        out.append(_Part("ack", pick(ACK_GENERIC, seed).get(lang, reg), True))
    else:
        out.append(_Part("ack", pick(ACK[sheet.signal], seed).fill(lang, reg, label), True))

    # Safety redirect: only steps the message is heading for now get a safer path.
    current = [b for b in sheet.never_say if b.confidence >= 0.75] or sheet.never_say[:1]
    if sheet.mode == "safety":
        lead = CATALOGUE.get(current[0].step_id) if current else None
        venture = lead is not None and lead.approach == "venture"
        intro = pick(SAFETY_INTRO if venture else SAFETY_INTRO_HEALTH, seed, 1)
        out.append(_Part("safety", intro.get(lang, reg), True))
        for i, b in enumerate(current[:2]):
            spec = CATALOGUE.get(b.step_id)
            safer = spec.safer.get(lang, reg) if spec else b.safer_alternative
            if not safer:
                continue
            template = SAFER if i == 0 else SAFER_MORE
            out.append(_Part(f"safer{i}", template.fill(lang, reg, label, safer=safer), True))

    # Pattern observation, with the user's own earlier words when they are short.
    if sheet.pattern is not None and sheet.pattern in PATTERN:
        out.append(_Part("pattern", PATTERN[sheet.pattern].fill(lang, reg, label), False))
        quote = sheet.pattern_evidence
        if quote and len(quote) <= 110:
            out.append(
                _Part("quote", QUOTE_BACK.fill(lang, reg, label, quote=quote.rstrip()), False)
            )

    # Follow-through, said plainly only when the evidence is clear either way.
    follow_through = sheet.focus_goal.follow_through if sheet.focus_goal else None
    if follow_through is not None and sheet.mode == "coach" and not sheet.gentle:
        # Never deflate a progress report with a low forecast; name it on other turns.
        if follow_through < 35 and sheet.signal is not TurnSignal.PROGRESS:
            out.append(_Part("follow", FOLLOW_LOW.get(lang, reg), False))
        elif follow_through >= 70:
            out.append(_Part("follow", FOLLOW_HIGH.get(lang, reg), False))

    # The concrete step (not while the user is weighing a risky move: the safer path
    # above is the step then).
    if sheet.mode == "coach":
        step = _step(sheet, domain)
        out.append(
            _Part("step", STEP_INTRO[sheet.strategy].fill(lang, reg, label, step=step), True)
        )
        if sheet.stretch:
            stretch = _steps(domain).stretch
            out.append(_Part("stretch", STRETCH.fill(lang, reg, label, stretch=stretch), False))

    # Close with one question (autonomy-supportive), unless the step already asks one.
    if sheet.mode == "safety":
        first = current[0].step_id if current else ""
        closing = SAFETY_QUESTIONS.get(first, SAFETY_QUESTION)
        out.append(_Part("question", closing.get(lang, reg), True))
    elif sheet.strategy is not CoachingStrategy.MOTIVATIONAL_INTERVIEWING:
        closing = pick(QUESTION[sheet.strategy], seed, 3)
        out.append(_Part("question", closing.get(lang, reg), False))
    return out


# Optional parts are dropped in this order when the reply runs over its budget.
_DROP_ORDER = ("stretch", "quote", "follow", "pattern", "question")


def render(sheet: DecisionSheet, *, helplines: Helplines) -> str:
    """Deterministic prose from the sheet alone, within its word budget (a safety
    reply with the ``helplines`` the service was configured with)."""
    lang, reg = sheet.language, sheet.formality
    if sheet.mode == "crisis":
        return crisis_reply(sheet.crisis.category, lang, reg, helplines, asks=sheet.crisis.asks)
    if sheet.mode == "check_in":
        return check_in_reply(lang, reg, helplines, again=sheet.crisis.question)
    if sheet.mode == "care" and sheet.answered_check_in == "denied":
        return after_denial_reply(lang, reg, helplines)
    if sheet.mode == "care":
        return " ".join(
            [
                CARE_OPEN.get(lang, reg),
                CARE_MIDDLE.get(lang, reg),
                *sheet.resources,
                CARE_QUESTION.get(lang, reg),
            ]
        )
    markers = [m for b in sheet.never_say for m in b.markers]
    cands = [p for p in parts(sheet) if not (markers and find_markers(p.text, markers))]
    for key in _DROP_ORDER:
        if sum(word_count(p.text) for p in cands) <= sheet.max_words:
            break
        if sheet.length == "long" and key in ("question", "pattern"):
            continue
        cands = [p for p in cands if p.key != key]
    if sum(word_count(p.text) for p in cands) > sheet.max_words:
        cands = [p for p in cands if p.essential]
    return " ".join(p.text for p in cands)
