"""The crisis screen: its deterministic tier and the contract of its model tier.

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

Rules, guards, cues and negations are data (``content/crisis/rules.toml``). The
confidence each outcome reports is *measured*, not chosen: ``coachbus eval crisis
--calibrate`` writes ``content/crisis/calibration.toml`` from the calibration split
(how often each rule kind, the uncertain bucket and the clean bucket were right on
text no rule was fitted to: on dev, which the rules are tuned on, every answer
looks right), and a test fails when the committed file differs from what that
split measures. "Clean" measures well below the policy's bar: the rules miss about
one crisis in five on unseen text, so with a model configured every message is
double-checked (see the risk_screen policy).
Recall beats precision here: a missed crisis is the costly error, a gentle check-in
on an ambiguous message costs little.
"""

from __future__ import annotations

import re
import tomllib
from collections import OrderedDict
from collections.abc import Collection
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

# The regex parser, to read which word a pattern must start with (see _first_words).
# Private modules of ``re``: where a Python lacks them, every pattern is simply tried
# everywhere (the same answers, only slower).
try:
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - present on every supported Python
    _sre = _sre_parse = None

from pydantic import BaseModel, ConfigDict, Field

from coachbus.contracts.payloads import CrisisCategory, CrisisScreen
from coachbus.normalize import fold_pattern, normalize

# Categories by urgency of help: the most urgent match wins, and a merge of two
# screens keeps the worse one. The one home of this order.
CRISIS_RANK: dict[CrisisCategory, int] = {
    CrisisCategory.NONE: 0,
    CrisisCategory.ABUSE: 1,
    CrisisCategory.MEDICAL_EMERGENCY: 2,
    CrisisCategory.SELF_HARM: 3,
    CrisisCategory.SUICIDAL_IDEATION: 4,
}
# Outcome names of the two "none" buckets in the calibration file.
CLEAN = "clean"
UNCERTAIN = "uncertain"
_MAX_MATCHED = 6


@dataclass(frozen=True, slots=True)
class Rule:
    rule_id: str
    category: CrisisCategory
    kind: str
    # One compiled pattern each: joined into one alternation, a short early match
    # would hide a longer overlapping one that a guard does not cover.
    rx: tuple[Pattern, ...]


@dataclass(frozen=True, slots=True)
class Guard:
    rx: tuple[Pattern, ...]
    # What the guard takes out: rule categories and/or "cue"; None is everything.
    # A calm story about someone else hides their suicide, not their collapse.
    applies: frozenset[str] | None = None

    def covers(self, what: str) -> bool:
        return self.applies is None or what in self.applies


@dataclass(frozen=True, slots=True)
class History:
    """Past and over: a sentence with a past marker is history when the message also
    says it is over (a resolution marker) and nowhere says it is back."""

    past: tuple[Pattern, ...]
    resolved: tuple[Pattern, ...]
    recurring: tuple[Pattern, ...]


@dataclass(frozen=True, slots=True)
class RuleBook:
    rules: tuple[Rule, ...]
    guards: tuple[Guard, ...]
    cues: tuple[Pattern, ...]
    negation: re.Pattern[str]
    # A clause ends here: a negation before it does not reach past it.
    clause_break: re.Pattern[str]
    history: History | None = None
    # Word start -> ids of the gated patterns that need it (see :func:`_first_words`):
    # a message's words name the few patterns that can match it, so the hundreds
    # that cannot are skipped without a call each. Built from the fields above.
    by_word: dict[str, frozenset[int]] = field(
        init=False, default_factory=dict, compare=False, repr=False
    )
    # Id of each gated pattern -> the part ("rule", "guard", "cue") and the position
    # there of what holds it; and per part, what holds an ungated pattern. A message
    # then visits only the rules, guards and cues it can touch, instead of looking
    # at each of a thousand patterns to skip it. Built from the fields above.
    owner: dict[int, tuple[str, int]] = field(
        init=False, default_factory=dict, compare=False, repr=False
    )
    always: dict[str, frozenset[int]] = field(
        init=False, default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        every = [p for r in self.rules for p in r.rx]
        every += [p for g in self.guards for p in g.rx]
        every += list(self.cues)
        index: dict[str, set[int]] = {}
        for p in every:
            for w in p.needs or ():
                index.setdefault(w, set()).add(id(p))
        self.by_word.update({w: frozenset(ids) for w, ids in index.items()})
        parts: dict[str, list[tuple[Pattern, ...]]] = {
            "rule": [r.rx for r in self.rules],
            "guard": [g.rx for g in self.guards],
            "cue": [(c,) for c in self.cues],
        }
        for part, holders in parts.items():
            always: set[int] = set()
            for i, patterns in enumerate(holders):
                for p in patterns:
                    if p.needs is None:
                        always.add(i)
                    else:
                        self.owner[id(p)] = (part, i)
            self.always[part] = frozenset(always)

    def visit(self, live: set[int]) -> dict[str, list[int]]:
        """Per part, in order, the positions of what has a pattern that may match:
        an ungated one, or one of ``live``."""
        out = {part: set(held) for part, held in self.always.items()}
        owner = self.owner
        for i in live:
            held = owner.get(i)
            if held is not None:
                out[held[0]].add(held[1])
        return {part: sorted(held) for part, held in out.items()}

    def live(self, index: WordIndex) -> set[int]:
        """Ids of the gated patterns a text with these words can match."""
        by_word = self.by_word
        out: set[int] = set()
        for k in index.keys:
            ids = by_word.get(k)
            if ids is not None:
                out |= ids
        return out


@dataclass(frozen=True, slots=True)
class Finding:
    """What the deterministic tier saw, richer than the contract (for eval and logs)."""

    category: CrisisCategory
    outcome: str  # a rule kind, "uncertain" or "clean"
    confidence: float
    matched: tuple[str, ...]
    rule_ids: tuple[str, ...]

    @property
    def uncertain(self) -> bool:
        return self.outcome == UNCERTAIN

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
        )


def _compile(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{fold_pattern(p)})" for p in patterns))


_WORD = re.compile(r"[a-z0-9]+")
_MAX_PREFIXES = 256


def _first_words(pattern: str) -> frozenset[str] | None:
    """Words one of which every match must start with, or None when unknown.

    Read from the parsed pattern: after a leading ``\\b``, the literal letters each
    alternative starts with, up to the first space (then it is a whole word, kept
    with its space). A message that holds no word
    starting with any of them cannot match, so the pattern is not run on it (a
    4,000-character message is screened by hundreds of patterns; most cannot match).
    """

    def seq(items: list[tuple[object, object]]) -> set[str] | None:
        cur = {""}
        for op, av in items:
            if op is _sre.AT and not any(cur):
                continue
            if op is _sre.LITERAL:
                ch = chr(av)  # type: ignore[arg-type]
                if ch == " ":  # a whole first word: "i " is not any word starting "i"
                    return {c + " " for c in cur} if any(cur) else None
                cur = {c + ch for c in cur}
                continue
            if op is _sre.SUBPATTERN:
                sub = seq(list(av[-1]))  # type: ignore[index]
                return _join(cur, sub)
            if op is _sre.BRANCH:
                alts: set[str] = set()
                for alt in av[1]:  # type: ignore[index]
                    a = seq(list(alt))
                    if a is None:
                        return cur if any(cur) else None
                    alts |= a
                return _join(cur, alts)
            break
        return cur if any(cur) else None

    def _join(cur: set[str], sub: set[str] | None) -> set[str] | None:
        if sub is None or "" in sub:
            return cur if any(cur) else None
        out = {c + x for c in cur for x in sub}
        return out if len(out) <= _MAX_PREFIXES else (cur if any(cur) else None)

    if _sre_parse is None:  # pragma: no cover
        return None
    try:
        parsed = list(_sre_parse.parse(pattern))
    except Exception:  # pragma: no cover - compiled already, so it parses
        return None
    if not parsed or parsed[0][0] is not _sre.AT:
        return None  # only patterns that start at a word boundary are gated
    found = seq(parsed)
    if not found:
        return None
    words = {w.split(" ")[0] + (" " if " " in w else "") for w in found}
    if any(not _WORD.fullmatch(w.rstrip(" ")) for w in words):
        return None
    return frozenset(words)


def _required(rx: re.Pattern[str]) -> tuple[tuple[str, ...], ...] | None:
    """What every match of ``rx`` contains: groups of strings, one string of each
    group in every match; None when nothing is known.

    Read from the parsed pattern: each item of a sequence must match, so each item's
    own requirement is the sequence's too; a run of literal characters requires
    itself, an alternation one of its branches' requirements (each branch must have
    one), a repeat of at least once its body's. Everything else (classes, optional
    parts, look-arounds, case-insensitive parts) requires nothing. Single characters
    are left out (a space is in every message), and of an alternation's branches
    only the most selective requirement of each is used.

    Whatever it does not know for sure (a construct not listed here, a flag that
    changes how letters match) requires nothing, and the pattern is tried as
    before: a requirement that a match could lack would hide a crisis.
    tests/shared/test_screen_perf_equivalence.py checks every match of every
    pattern in the corpora against it.

    A text that lacks every string of a group cannot match, so the pattern is not
    run on it: the patterns that start mid-word (``\\w*pflanze``) or with a number
    were tried at every position of every message, and the gated ones wherever a
    common first word ("i ") stood.
    """
    if _sre_parse is None or rx.flags & re.IGNORECASE:  # pragma: no cover - see above
        return None

    def useful(need: frozenset[str]) -> bool:
        return min(map(len, need), default=0) >= _MIN_REQUIRED

    def seq(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
        needs: list[frozenset[str]] = []
        run: list[str] = []

        def close() -> None:
            if run:
                lit = frozenset({"".join(run)})
                if useful(lit):
                    needs.append(lit)
                run.clear()

        for op, av in items:
            if op is _sre.LITERAL:
                run.append(chr(av))
                continue
            close()
            needs.extend(n for n in one(op, av) if useful(n))
        close()
        return needs

    def one(op: Any, av: Any) -> list[frozenset[str]]:
        if op is _sre.SUBPATTERN:
            _group, add_flags, _del_flags, body = av
            return [] if add_flags & re.IGNORECASE else seq(list(body))
        if op is _sre.BRANCH:
            out: set[str] = set()
            for alt in av[1]:
                needs = seq(list(alt))
                if not needs:
                    return []
                out |= max(needs, key=_rank)
            return [frozenset(out)]
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            low, _high, body = av
            return seq(list(body)) if low >= 1 else []
        return []

    try:
        found = seq(list(_sre_parse.parse(rx.pattern, rx.flags)))
    except Exception:  # pragma: no cover - compiled already, so it parses
        return None
    # The most selective first (a text fails fastest there), duplicates once.
    groups = sorted({tuple(sorted(g)) for g in found}, key=lambda g: (_rank(g), g))
    return tuple(reversed(groups))[:_MAX_REQUIRED] or None


def _rank(need: Collection[str]) -> tuple[int, int]:
    """Selective means: its shortest string is long, and there are few of them."""
    return (min(map(len, need)), -len(need))


# Required strings shorter than this are in nearly every message; more groups than
# this cost more to check than they save.
_MIN_REQUIRED = 2
_MAX_REQUIRED = 4


@dataclass(frozen=True, slots=True)
class Pattern:
    """A compiled pattern, the word starts it needs (see :func:`_first_words`) and
    what every match of it contains (see :func:`_required`)."""

    rx: re.Pattern[str]
    needs: frozenset[str] | None
    required: tuple[tuple[str, ...], ...] | None = None

    def finditer(self, text: str, index: WordIndex) -> list[re.Match[str]]:
        """Like ``rx.finditer``, but tried only on a text holding a string it needs,
        and only where a word it needs starts."""
        if self.required is not None:
            for group in self.required:  # plain loops: runs for every live pattern
                for s in group:
                    if s in text:
                        break
                else:
                    return []
        if self.needs is None:
            return list(self.rx.finditer(text))
        hits = self.needs & index.keys
        if not hits:
            return []
        where = sorted({i for k in hits for i in index.at[k]})
        out: list[re.Match[str]] = []
        end = 0
        for i in where:
            if i < end:
                continue
            m = self.rx.match(text, i)
            if m is not None:
                out.append(m)
                end = m.end()
        return out


@dataclass(frozen=True, slots=True)
class WordIndex:
    """Where each prefix of each word starts, and each whole word with a space after
    it: the positions a gated :class:`Pattern` is tried at."""

    at: dict[str, list[int]]
    keys: frozenset[str]


def _word_index(text: str) -> WordIndex:
    at: dict[str, list[int]] = {}
    for m in _WORD.finditer(text):
        w, start = m.group(0), m.start()
        for i in range(1, len(w) + 1):
            at.setdefault(w[:i], []).append(start)
        at.setdefault(w + " ", []).append(start)
    return WordIndex(at=at, keys=frozenset(at))


def _compile_each(patterns: list[str]) -> tuple[Pattern, ...]:
    out = []
    for p in patterns:
        folded = fold_pattern(p)
        rx = re.compile(folded)
        out.append(Pattern(rx, _first_words(folded), _required(rx)))
    return tuple(out)


def parse_rulebook(text: str) -> RuleBook:
    raw = tomllib.loads(text)
    rules = tuple(
        Rule(
            rule_id=r["id"],
            category=CrisisCategory(r["label"]),
            kind=r["kind"],
            rx=_compile_each(r["patterns"]),
        )
        for r in raw["rule"]
    )
    if any(r.category is CrisisCategory.NONE for r in rules):
        raise ValueError("a rule must name a crisis category; 'none' is what no rule says")
    ids = [r.rule_id for r in rules]
    if len(ids) != len(set(ids)):
        raise ValueError("rule ids must be unique")
    known = {c.value for c in CrisisCategory} | {"cue"}
    guards = []
    for g in raw.get("guard", []):
        applies = g.get("applies")
        if applies is not None and not set(applies) <= known:
            raise ValueError(f"guard {g.get('id')!r}: unknown 'applies' {applies!r}")
        guards.append(
            Guard(
                rx=_compile_each(g["patterns"]),
                applies=frozenset(applies) if applies is not None else None,
            )
        )
    h = raw.get("history")
    history = (
        History(
            past=_compile_each(h["past"]),
            resolved=_compile_each(h["resolved"]),
            recurring=_compile_each(h["recurring"]),
        )
        if h
        else None
    )
    return RuleBook(
        rules=rules,
        guards=tuple(guards),
        cues=tuple(p for c in raw.get("cue", []) for p in _compile_each(c["patterns"])),
        negation=_compile(raw["negation"]["patterns"]),
        clause_break=_compile(raw["negation"]["clause_breaks"]),
        history=history,
    )


@cache
def rulebook() -> RuleBook:
    text = resources.files("coachbus.content").joinpath("crisis/rules.toml").read_text("utf-8")
    return parse_rulebook(text)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Measured confidence per outcome (rule kind, "uncertain", "clean")."""

    confidence: dict[str, float]
    # The value used for an outcome the calibration split never produced: the screen
    # has no evidence for it, so it reports the lowest confidence it knows.
    unseen: float

    def of(self, outcome: str) -> float:
        return self.confidence.get(outcome, self.unseen)


@cache
def calibration() -> Calibration:
    path = resources.files("coachbus.content").joinpath("crisis/calibration.toml")
    raw = tomllib.loads(path.read_text("utf-8"))
    table = {str(k): float(v) for k, v in raw["confidence"].items()}
    return Calibration(confidence=table, unseen=min(table.values(), default=0.5))


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


def _history_spans(book: RuleBook, text: str, index: WordIndex) -> list[tuple[int, int]]:
    """Sentences told as history (see :class:`History`); nothing in them counts."""
    h = book.history
    if h is None or not any(p.finditer(text, index) for p in h.resolved):
        return []
    if any(p.finditer(text, index) for p in h.recurring):
        return []
    past = [m.start() for p in h.past for m in p.finditer(text, index)]
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


# Screens already made, by exact text. Coach, Stability, Shadow and Synth each screen
# a turn's message (Shadow and Synth twice), so a process screened the same text
# several times per turn. A Finding is frozen (tuples only), so a cached one can be
# shared; the memo holds the rule book and calibration it was computed with and is
# emptied when either changes (tests that load another book stay correct).
_MEMO_SIZE = 256
_memo: OrderedDict[str, Finding] = OrderedDict()
_memo_for: tuple[RuleBook, Calibration] | None = None


def clear_memo() -> None:
    """Forget every screen made (tests, and a benchmark of the uncached cost)."""
    global _memo_for
    _memo.clear()
    _memo_for = None


def assess(text: str, book: RuleBook | None = None, cal: Calibration | None = None) -> Finding:
    """The deterministic crisis screen of one message, with what it matched."""
    global _memo_for
    book = book or rulebook()
    cal = cal or calibration()
    owner = _memo_for
    if owner is None or owner[0] is not book or owner[1] is not cal:
        _memo.clear()
        _memo_for = (book, cal)
    found = _memo.get(text)
    if found is not None:
        with suppress(KeyError):  # evicted meanwhile by another thread: still right
            _memo.move_to_end(text)
        return found
    found = _assess(text, book, cal)
    _memo[text] = found
    if len(_memo) > _MEMO_SIZE:
        with suppress(KeyError):
            _memo.popitem(last=False)
    return found


def _may(p: Pattern, live: set[int]) -> bool:
    return p.needs is None or id(p) in live


def _assess(text: str, book: RuleBook, cal: Calibration) -> Finding:
    n = normalize(text)
    index = _word_index(n)
    history = _history_spans(book, n, index)
    live = book.live(index)
    visit = book.visit(live)
    guards = [book.guards[i] for i in visit["guard"]]
    spans = [
        (g, [m.span() for p in g.rx if _may(p, live) for m in p.finditer(n, index)]) for g in guards
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
    matched: list[str] = []
    rule_ids: list[str] = []
    cue_hits: list[str] = []
    for rule in (book.rules[i] for i in visit["rule"]):
        hit = None
        for p in rule.rx:
            if p.needs is not None and id(p) not in live:
                continue  # none of the words it needs: it cannot match
            for m in p.finditer(n, index):
                if _overlaps(m.span(), guarded(rule.category.value)):
                    continue
                if _negated(book, n, m.start()):
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
        if best is None or CRISIS_RANK[rule.category] > CRISIS_RANK[best.category]:
            best = rule
    if best is not None:
        return Finding(
            category=best.category,
            outcome=best.kind,
            confidence=cal.of(best.kind),
            matched=tuple(sorted(set(matched))[:_MAX_MATCHED]),
            rule_ids=tuple(rule_ids),
        )
    cover = guarded("cue")
    for cue in (book.cues[i] for i in visit["cue"]):
        if cue.needs is not None and id(cue) not in live:
            continue
        cue_hits.extend(
            m.group(0) for m in cue.finditer(n, index) if not _overlaps(m.span(), cover)
        )
    if cue_hits:
        return Finding(
            category=CrisisCategory.NONE,
            outcome=UNCERTAIN,
            confidence=cal.of(UNCERTAIN),
            matched=tuple(sorted(set(cue_hits))[:_MAX_MATCHED]),
            rule_ids=(),
        )
    return Finding(
        category=CrisisCategory.NONE,
        outcome=CLEAN,
        confidence=cal.of(CLEAN),
        matched=(),
        rule_ids=(),
    )


def screen_crisis(text: str) -> CrisisScreen:
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


def worse(a: CrisisScreen, b: CrisisScreen | None) -> CrisisScreen:
    """The more alarming of two screens: a crisis beats uncertain beats clean, then
    the more urgent category, then the higher confidence. Never lowers what ``a``
    found, except that a confident clean answer from a model (``b``) settles an
    uncertain ``a``: that is what the model was asked for."""
    if b is None:
        return a
    if not is_crisis(b):
        if is_crisis(a) or b.uncertain or not a.uncertain:
            return a
        return b
    if not is_crisis(a):
        return b
    if (CRISIS_RANK[b.category], b.confidence) > (CRISIS_RANK[a.category], a.confidence):
        return b.model_copy(update={"matched": sorted({*a.matched, *b.matched})[:_MAX_MATCHED]})
    return a.model_copy(
        update={
            "confidence": max(a.confidence, b.confidence)
            if b.category is a.category
            else a.confidence,
            "matched": sorted({*a.matched, *b.matched})[:_MAX_MATCHED],
        }
    )


# --------------------------------------------------------------------------- model tier


class RiskScreenCall(BaseModel):
    """The model's crisis screen of the last message."""

    model_config = ConfigDict(extra="forbid")

    category: CrisisCategory
    confidence: float = Field(ge=0, le=1)
    evidence: list[str] = Field(
        max_length=4, description="the person's exact words that show it; empty for none"
    )


RISK_INSTRUCTIONS = (
    "Screen the person's last message for a crisis. Categories: suicidal_ideation "
    "(wanting to die, not wanting to wake up, being a burden, no reason to live, "
    "saying goodbye for good, a plan, method or time, indirect or paraphrased too), "
    "self_harm (hurting themselves on purpose, in any tense), abuse (someone hurting, "
    "threatening or controlling them), medical_emergency, or none. Figures of speech "
    "('this job is killing me', 'ich bin todmüde') are none. If it is a crisis, quote "
    "the person's exact words that show it in 'evidence'; for none leave 'evidence' "
    "empty. 'confidence' is how sure you are, 0 to 1. If the data names a question our "
    "last reply asked, the last message answers it: a yes, 'sometimes', 'kind of' or "
    "'maybe' to 'are you having thoughts of ending your life?' is suicidal_ideation, and "
    "so is 'no' or 'not sure' to 'are you safe right now?'; then quote the whole answer "
    "as evidence. Weigh the listed warning signs of recent messages with the last one."
)

MIN_QUOTE_CHARS = 8


def _loose(text: str) -> str:
    return " ".join(normalize(text).split())


def quote_problems(quotes: list[str], message: str, what: str) -> list[str]:
    """Quotes must be the person's own words: verbatim up to the normaliser (case,
    spacing, typographic quotes, umlaut spelling)."""
    said = _loose(message)
    out: list[str] = []
    for q in quotes:
        n = _loose(q).strip(" \"'.,")
        if len(n) < MIN_QUOTE_CHARS or len(n.split()) < 2:
            out.append(f"{what}: quote too short to show anything: {q!r}")
        elif n not in said:
            out.append(f"{what}: quote is not in the message: {q!r}")
    return out


def check_claim(claim: RiskScreenCall, message: str, *, answering: bool = False) -> list[str]:
    """A model's crisis claim must quote the message (it can invent nothing).

    ``answering``: the message answers a question our last reply asked. Then the
    whole message is evidence however short ("ja", "eher ja"): that is the answer."""
    if claim.category is CrisisCategory.NONE:
        return []
    if not claim.evidence:
        return [f"{claim.category.value}: no quote of the person's words given"]
    if answering:
        whole = _loose(message).strip(_QUOTE_EDGES)
        quotes = [q for q in claim.evidence if _loose(q).strip(_QUOTE_EDGES) != whole]
        return quote_problems(quotes, message, claim.category.value)
    return quote_problems(claim.evidence, message, claim.category.value)


_QUOTE_EDGES = " \"'.,!?"


def claim_screen(claim: RiskScreenCall) -> CrisisScreen:
    """The contract form of a validated model claim."""
    return CrisisScreen(
        category=claim.category,
        confidence=claim.confidence,
        matched=[q.lower()[:80] for q in claim.evidence],
        escalated=claim.category is not CrisisCategory.NONE,
    )


__all__ = [
    "CLEAN",
    "CRISIS_RANK",
    "RISK_INSTRUCTIONS",
    "UNCERTAIN",
    "Calibration",
    "Finding",
    "Guard",
    "History",
    "RiskScreenCall",
    "RuleBook",
    "assess",
    "calibration",
    "check_claim",
    "claim_screen",
    "clear_memo",
    "is_crisis",
    "needs_check_in",
    "parse_rulebook",
    "quote_problems",
    "review_severity",
    "rulebook",
    "screen_crisis",
    "worse",
]
