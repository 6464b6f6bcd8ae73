"""The crisis screen of one message: its deterministic tier.

Coach (the immediate reply), Stability (the risk frame and the human review) and
Synth (the final reply, also when Stability is late) all call :func:`screen_crisis`,
so one message gets one answer wherever it is read.

How the deterministic tier decides, on the normalised text (coachbus.normalize):

1. **Guards** mark figurative speech ("this deadline is killing me", "die Hitze
   bringt mich um", "todmüde"), explicit denials, other people's stories and media.
   Nothing inside a guarded span counts (a guard may name the categories it takes
   out: a friend's suicide told calmly is guarded, a friend's collapse is not).
   **History** is a guard too: a sentence with a past marker, in a message that says
   it is over and nowhere that it is back, is not read.
2. **Rules** read a first-person, literal statement of a crisis: a wish to be dead,
   thoughts of suicide, a burden or no-reason-to-live statement, farewell behaviour,
   a plan, a method or a time, self-harm in any tense, abuse, a medical emergency.
   The most urgent category found wins (``CRISIS_RANK``).
3. A rule match under a clear **negation** ("I would never kill myself") is not a
   crisis, but it is not clean either: it is read as a cue.
4. **Cues** are words that carry risk (death, dying, ending it, cutting, gone,
   "nicht mehr") without a rule that reads them. Text with a cue and no rule is
   *uncertain*: a model double-checks it when one is configured; without one the
   person is asked directly and a human sees it (``uncertain=True``).
5. Everything else is clean.

Rules, guards, cues and negations are data (``content/crisis/rules.toml``, read by
coachbus.safety.rulebook). The confidence each outcome reports is *measured*, not
chosen (coachbus.safety.calibration). "Clean" measures well below the policy's bar:
the rules miss about one crisis in five on unseen text, so with a model configured
every message is double-checked (see the risk_screen policy and
coachbus.safety.model).
Recall beats precision here: a missed crisis is the costly error, a gentle check-in
on an ambiguous message costs little.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from contextlib import suppress
from dataclasses import dataclass
from typing import Literal

from coachbus.contracts.payloads import CheckInQuestion, CrisisCategory, CrisisScreen, Risk
from coachbus.learned import LinearModel, shipped
from coachbus.normalize import NormalizedText, normalized
from coachbus.safety.calibration import CLEAN, LEARNED, UNCERTAIN, Calibration, calibration
from coachbus.safety.prefilter import Pattern, WordIndex, word_index
from coachbus.safety.rulebook import Rule, RuleBook, rulebook

# Categories by urgency of help: the most urgent match wins, and a merge of two
# screens keeps the more urgent one. The one home of this order.
CRISIS_RANK: dict[CrisisCategory, int] = {
    CrisisCategory.NONE: 0,
    CrisisCategory.ABUSE: 1,
    CrisisCategory.MEDICAL_EMERGENCY: 2,
    CrisisCategory.SELF_HARM: 3,
    CrisisCategory.SUICIDAL_IDEATION: 4,
}
# The learned crisis reader's one label: any risk the crisis corpus labels.
RISK = "risk"
# "sounds good", "hmm not sure. maybe.": a message of a few words is read by the
# rules alone; its n-grams are too few to be evidence of distress, and the rules
# read the short risks ("kms", "ich kann nicht mehr") themselves.
LEARNED_MIN_WORDS = 5

# A screen names at most this many matched phrases: evidence for a reader, not a log.
MAX_MATCHED = 6


@dataclass(frozen=True, slots=True)
class Finding:
    """What the deterministic tier saw, richer than the contract (for eval and logs)."""

    category: CrisisCategory
    outcome: str  # a rule kind, "uncertain" or "clean"
    confidence: float
    matched: tuple[str, ...]
    rule_ids: tuple[str, ...]
    # The question the crisis reply asks back, where not the category's own.
    asks: CheckInQuestion | None = None
    # Risk words were read and set aside (figurative, history, someone else's): the
    # rules' reading stands, no learned reader second-guesses it.
    set_aside: bool = False

    @property
    def uncertain(self) -> bool:
        # The learned reader's risk is asked about like a cue's: never a crisis on
        # n-grams alone, always the direct question.
        return self.outcome in (UNCERTAIN, LEARNED)

    @property
    def flagged(self) -> bool:
        """Help is offered: a crisis, or a direct check-in on an uncertain message."""
        return self.category is not CrisisCategory.NONE or self.uncertain

    def screen(self) -> CrisisScreen:
        return CrisisScreen(
            category=self.category,
            confidence=self.confidence,
            matched=list(self.matched),
            escalated=self.flagged,
            uncertain=self.uncertain,
            asks=self.asks,
        )


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def _history_spans(book: RuleBook, text: str, index: WordIndex) -> list[tuple[int, int]]:
    """Sentences told as history (see rulebook.History); nothing in them counts."""
    told = book.history
    if told is None or not any(p.finditer(text, index) for p in told.resolved):
        return []
    if any(p.finditer(text, index) for p in told.recurring):
        return []
    past = [m.start() for p in told.past for m in p.finditer(text, index)]
    return [
        s.span() for s in _SENTENCE.finditer(text) if any(s.start() <= i < s.end() for i in past)
    ]


def _negated(book: RuleBook, text: str, start: int) -> bool:
    """A negation in the same clause, a few words before the match."""
    window = text[max(0, start - 48) : start]
    breaks = list(book.clause_break.finditer(window))
    if breaks:
        window = window[breaks[-1].end() :]
    return book.negation.search(window) is not None


# Screens already made, by normalised text (a finding depends on nothing else).
# Coach, Stability, Shadow and Synth each screen a turn's message (Shadow and Synth
# twice), so a process screened the same text several times per turn. A Finding is
# frozen (tuples only), so a cached one can be shared; the memo holds the rule book,
# calibration and learned reader it was computed with and is emptied when any of
# them changes (tests that load another book or switch the reader stay correct).
_MEMO_SIZE = 256
_memo: OrderedDict[str, Finding] = OrderedDict()
_memo_for: tuple[RuleBook, Calibration, LinearModel | None] | None = None


def clear_memo() -> None:
    """Forget every screen made (tests, and a benchmark of the uncached cost)."""
    global _memo_for
    _memo.clear()
    _memo_for = None


def assess(
    text: str | NormalizedText, book: RuleBook | None = None, cal: Calibration | None = None
) -> Finding:
    """The deterministic crisis screen of one message, with what it matched."""
    global _memo_for
    book = book or rulebook()
    cal = cal or calibration()
    reader = shipped("crisis")
    owner = _memo_for
    if owner is None or owner[0] is not book or owner[1] is not cal or owner[2] is not reader:
        _memo.clear()
        _memo_for = (book, cal, reader)
    said = normalized(text).text
    found = _memo.get(said)
    if found is not None:
        with suppress(KeyError):  # evicted meanwhile by another thread: still right
            _memo.move_to_end(said)
        return found
    found = screen_normalized(said, book, cal)
    _memo[said] = found
    if len(_memo) > _MEMO_SIZE:
        with suppress(KeyError):
            _memo.popitem(last=False)
    return found


def _may_match(pattern: Pattern, live: set[int]) -> bool:
    """Ungated, or gated and one of the words it needs is in the message."""
    return pattern.needs is None or id(pattern) in live


def _asks(book: RuleBook, kinds: list[str]) -> CheckInQuestion | None:
    """The question the crisis reply asks back: a rung below the safety question only
    when every rule of the category that fired asks it ("better off without me, I
    want to kill myself" told the thoughts already: are you safe?)."""
    asked = {book.asks.get(k) for k in kinds}
    return asked.pop() if len(asked) == 1 else None


def screen_normalized(text: str, book: RuleBook, cal: Calibration) -> Finding:
    """The screen itself, without the memo, of an already normalised ``text``."""
    index = word_index(text)
    history = _history_spans(book, text, index)
    live = book.live(index)
    visit = book.visit(live)
    guards = [book.guards[i] for i in visit["guard"]]
    spans = [
        (g, [m.span() for p in g.rx if _may_match(p, live) for m in p.finditer(text, index)])
        for g in guards
    ]

    covered: dict[str, list[tuple[int, int]]] = {}

    def guarded(what: str) -> list[tuple[int, int]]:
        # Once per category and message, and only when something matched.
        cover = covered.get(what)
        if cover is None:
            cover = history + [sp for g, found in spans if g.covers(what) for sp in found]
            covered[what] = cover
        return cover

    best: Rule | None = None
    # A risk phrase the rules read and set aside (told as history, someone else's
    # words): their reading stands, the learned reader is not asked.
    ruled_out = False
    matched: list[str] = []
    rule_ids: list[str] = []
    fired: list[Rule] = []
    cue_hits: list[str] = []
    for rule in (book.rules[i] for i in visit["rule"]):
        hit = None
        for pattern in rule.rx:
            if not _may_match(pattern, live):
                continue  # none of the words it needs: it cannot match
            for m in pattern.finditer(text, index):
                if _overlaps(m.span(), guarded(rule.category.value)):
                    ruled_out = True
                    continue
                if _negated(book, text, m.start()):
                    cue_hits.append(m.group(0))
                    continue
                hit = m
                break
            if hit is not None:
                break
        if hit is None:
            continue
        matched.append(hit.group(0))
        rule_ids.append(rule.rule_id)
        fired.append(rule)
        if best is None or CRISIS_RANK[rule.category] > CRISIS_RANK[best.category]:
            best = rule
    if best is not None:
        return Finding(
            category=best.category,
            outcome=best.kind,
            confidence=cal.of(best.kind),
            matched=tuple(sorted(set(matched))[:MAX_MATCHED]),
            rule_ids=tuple(rule_ids),
            asks=_asks(book, [r.kind for r in fired if r.category is best.category]),
        )
    cover = guarded("cue")
    for cue in (book.cues[i] for i in visit["cue"]):
        if not _may_match(cue, live):
            continue
        for m in cue.finditer(text, index):
            if _overlaps(m.span(), cover):
                ruled_out = True
            else:
                cue_hits.append(m.group(0))
    if cue_hits:
        return Finding(
            category=CrisisCategory.NONE,
            outcome=UNCERTAIN,
            confidence=cal.of(UNCERTAIN),
            matched=tuple(sorted(set(cue_hits))[:MAX_MATCHED]),
            rule_ids=(),
        )
    reader = None if ruled_out or len(text.split()) < LEARNED_MIN_WORDS else shipped("crisis")
    if reader is not None and reader.probabilities(text)[RISK] >= reader.bar:
        # Distress in words no rule has ("the bills, the kids, I can't see a way
        # through any of it"): the rules read it as clean, the learned reader as the
        # crisis corpus's risk. Asking the direct question protects more than it
        # costs (asking does not raise risk), so it is asked; its confidence is the
        # calibration split's measure of this outcome.
        return Finding(
            category=CrisisCategory.NONE,
            outcome=LEARNED,
            confidence=cal.of(LEARNED),
            matched=(f"learned: {', '.join(reader.evidence(text, RISK))}",),
            rule_ids=(),
        )
    return Finding(
        category=CrisisCategory.NONE,
        outcome=CLEAN,
        confidence=cal.of(CLEAN),
        matched=(),
        rule_ids=(),
        set_aside=ruled_out,
    )


def screen_crisis(text: str | NormalizedText) -> CrisisScreen:
    """Deterministic crisis screen (the contract form); see the module docstring."""
    return assess(text).screen()


def is_crisis(screen: CrisisScreen) -> bool:
    return screen.category is not CrisisCategory.NONE


def needs_check_in(screen: CrisisScreen) -> bool:
    """Not a crisis, but nobody has ruled one out: ask directly."""
    return not is_crisis(screen) and screen.uncertain


def review_severity(screen: CrisisScreen) -> Literal["moderate", "high", "critical"] | None:
    """How urgently a human must see this screen (None: no human needed).

    A crisis at high or critical; a screen nobody settled (risk cues, no rule, no
    model to ask or a model that failed) at moderate, so a person looks at it even
    without an LLM. The one rule Stability's router and Synth (when Stability is
    missing) both apply."""
    if needs_check_in(screen):
        return "moderate"
    if not is_crisis(screen):
        return None
    if screen.plan:
        # A way, a means or a time is known, or the person said they are not safe.
        return "critical"
    if screen.basis != "message":
        # A yes to our check-in, or warning signs that add up: ideation disclosed,
        # with no plan known yet (C-SSRS levels 1-2): high, not critical.
        return "high"
    return "critical" if screen.confidence >= 0.5 else "high"


def merge_screens(first: CrisisScreen, second: CrisisScreen | None) -> CrisisScreen:
    """Two screens of one message as one: the more alarming of the two (a crisis beats
    uncertain beats clean, then the more urgent category, then the higher confidence).

    Never lowers what ``first`` found, with one exception: a confident clean
    ``second`` (a model's answer) settles an uncertain ``first``, because settling it
    is what the model was asked for. Safety is monotone otherwise: whichever tier
    saw a crisis, the crisis stays."""
    if second is None:
        return first
    if not is_crisis(second):
        if is_crisis(first) or second.uncertain or not first.uncertain:
            return first
        return second
    if not is_crisis(first):
        return second
    matched = sorted({*first.matched, *second.matched})[:MAX_MATCHED]
    if (CRISIS_RANK[second.category], second.confidence) > (
        CRISIS_RANK[first.category],
        first.confidence,
    ):
        # The rules' rung stays: Coach already asked its question with the rules' screen,
        # and the person's next message answers that one.
        asks = first.asks if second.category is first.category else second.asks
        return second.model_copy(update={"matched": matched, "asks": asks})
    return first.model_copy(
        update={
            "confidence": max(first.confidence, second.confidence)
            if second.category is first.category
            else first.confidence,
            "matched": matched,
        }
    )


def crisis_risk(category: CrisisCategory) -> Risk:
    """A crisis in Stability's risk frame: at the top of every scale."""
    return Risk(
        risk_id=f"crisis:{category.value}",
        description=f"possible {category.value.replace('_', ' ')}",
        severity=5,
        detectability=4,
        reversibility=5,
    )


__all__ = [
    "CRISIS_RANK",
    "MAX_MATCHED",
    "Finding",
    "assess",
    "clear_memo",
    "crisis_risk",
    "is_crisis",
    "merge_screens",
    "needs_check_in",
    "review_severity",
    "screen_crisis",
    "screen_normalized",
]
