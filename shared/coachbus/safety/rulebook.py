"""The crisis screen's rule book: rules, guards, history, cues and negations as data.

The book is ``content/crisis/rules.toml`` (its header explains how a pattern is
written); this module reads and checks it, and indexes its patterns so that a
message visits only the rules, guards and cues it can touch (see
coachbus.safety.prefilter). What the screen does with them is coachbus.safety.screen.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import get_args

from coachbus.contracts.payloads import CheckInQuestion, CrisisCategory
from coachbus.normalize import fold_pattern
from coachbus.safety.prefilter import Pattern, WordIndex, compile_each


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
    # The question a crisis reply asks back, by rule kind, where it is not "are you
    # safe right now?" (see [asks] in rules.toml: the C-SSRS ladder).
    asks: dict[str, CheckInQuestion] = field(default_factory=dict, compare=False)
    # Word start -> ids of the gated patterns that need it (see prefilter.first_words):
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
        for pattern in every:
            for word in pattern.needs or ():
                index.setdefault(word, set()).add(id(pattern))
        self.by_word.update({word: frozenset(ids) for word, ids in index.items()})
        parts: dict[str, list[tuple[Pattern, ...]]] = {
            "rule": [r.rx for r in self.rules],
            "guard": [g.rx for g in self.guards],
            "cue": [(c,) for c in self.cues],
        }
        for part, holders in parts.items():
            always: set[int] = set()
            for position, patterns in enumerate(holders):
                for pattern in patterns:
                    if pattern.needs is None:
                        always.add(position)
                    else:
                        self.owner[id(pattern)] = (part, position)
            self.always[part] = frozenset(always)

    def visit(self, live: set[int]) -> dict[str, list[int]]:
        """Per part, in order, the positions of what has a pattern that may match:
        an ungated one, or one of ``live``."""
        out = {part: set(held) for part, held in self.always.items()}
        owner = self.owner
        for pattern_id in live:
            held = owner.get(pattern_id)
            if held is not None:
                out[held[0]].add(held[1])
        return {part: sorted(held) for part, held in out.items()}

    def live(self, index: WordIndex) -> set[int]:
        """Ids of the gated patterns a text with these words can match."""
        by_word = self.by_word
        out: set[int] = set()
        for key in index.keys:
            ids = by_word.get(key)
            if ids is not None:
                out |= ids
        return out


def _alternation(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{fold_pattern(p)})" for p in patterns))


def parse_rulebook(text: str) -> RuleBook:
    raw = tomllib.loads(text)
    rules = tuple(
        Rule(
            rule_id=r["id"],
            category=CrisisCategory(r["label"]),
            kind=r["kind"],
            rx=compile_each(r["patterns"]),
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
                rx=compile_each(g["patterns"]),
                applies=frozenset(applies) if applies is not None else None,
            )
        )
    told = raw.get("history")
    history = (
        History(
            past=compile_each(told["past"]),
            resolved=compile_each(told["resolved"]),
            recurring=compile_each(told["recurring"]),
        )
        if told
        else None
    )
    asks: dict[str, CheckInQuestion] = {}
    kinds = {r.kind for r in rules}
    for kind, question in raw.get("asks", {}).items():
        if kind not in kinds:
            raise ValueError(f"[asks]: no rule has kind {kind!r}")
        if question not in get_args(CheckInQuestion):
            raise ValueError(f"[asks] {kind}: unknown question {question!r}")
        asks[kind] = question
    return RuleBook(
        rules=rules,
        guards=tuple(guards),
        cues=tuple(p for c in raw.get("cue", []) for p in compile_each(c["patterns"])),
        negation=_alternation(raw["negation"]["patterns"]),
        clause_break=_alternation(raw["negation"]["clause_breaks"]),
        history=history,
        asks=asks,
    )


@cache
def rulebook() -> RuleBook:
    text = resources.files("coachbus.content").joinpath("crisis/rules.toml").read_text("utf-8")
    return parse_rulebook(text)


__all__ = ["Guard", "History", "Rule", "RuleBook", "parse_rulebook", "rulebook"]
