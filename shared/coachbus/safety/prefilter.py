"""Which of the rule book's patterns can match a message at all.

The crisis screen holds about a thousand patterns, and a message can match only a
few of them. Running each on every message made the screen the costliest step of a
turn, so each pattern carries two facts read from its own parsed form:

* the **first words** one of which every match starts with (:func:`first_words`):
  the pattern is tried only where such a word starts in the message;
* the **required strings** every match contains (:func:`required_strings`): a
  message that lacks them is not searched at all.

Both are read with the regex parser of ``re``; whatever they cannot be sure of
means "nothing known", and the pattern is tried everywhere as it would be without
them: a requirement that a match could lack would hide a crisis.
tests/shared/test_screen_perf_equivalence.py checks that the screen finds exactly
what it finds without them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from coachbus.normalize import fold_pattern

# The regex parser, to read which word a pattern must start with and which strings
# it must contain. Private modules of ``re``: where a Python lacks them, every
# pattern is simply tried everywhere (the same answers, only slower).
try:
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - present on every supported Python
    _sre = _sre_parse = None

_WORD = re.compile(r"[a-z0-9]+")
# More first-word prefixes than this cost more to index than they save.
_MAX_PREFIXES = 256
# Required strings shorter than this are in nearly every message; more groups than
# this cost more to check than they save.
_MIN_REQUIRED = 2
_MAX_REQUIRED = 4


@dataclass(frozen=True, slots=True)
class WordIndex:
    """Where each prefix of each word starts, and each whole word with a space after
    it: the positions a gated :class:`Pattern` is tried at."""

    at: dict[str, list[int]]
    keys: frozenset[str]


def word_index(text: str) -> WordIndex:
    """The word index of a normalised text."""
    at: dict[str, list[int]] = {}
    for m in _WORD.finditer(text):
        word, start = m.group(0), m.start()
        for end in range(1, len(word) + 1):
            at.setdefault(word[:end], []).append(start)
        at.setdefault(word + " ", []).append(start)
    return WordIndex(at=at, keys=frozenset(at))


@dataclass(frozen=True, slots=True)
class Pattern:
    """A compiled pattern, the word starts it needs (see :func:`first_words`) and
    what every match of it contains (see :func:`required_strings`)."""

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


def compile_each(patterns: list[str]) -> tuple[Pattern, ...]:
    """Each pattern folded like the text it reads (coachbus.normalize), compiled, and
    gated by what it needs."""
    out = []
    for source in patterns:
        folded = fold_pattern(source)
        rx = re.compile(folded)
        out.append(Pattern(rx, first_words(folded), required_strings(rx)))
    return tuple(out)


def first_words(pattern: str) -> frozenset[str] | None:
    """Words one of which every match must start with, or None when unknown.

    Read from the parsed pattern: after a leading ``\\b``, the literal letters each
    alternative starts with, up to the first space (then it is a whole word, kept
    with its space). A message that holds no word
    starting with any of them cannot match, so the pattern is not run on it (a
    4,000-character message is screened by hundreds of patterns; most cannot match).
    """

    def starts(items: list[tuple[object, object]]) -> set[str] | None:
        prefixes = {""}
        for op, arg in items:
            if op is _sre.AT and not any(prefixes):
                continue
            if op is _sre.LITERAL:
                ch = chr(arg)  # type: ignore[arg-type]
                if ch == " ":  # a whole first word: "i " is not any word starting "i"
                    return {p + " " for p in prefixes} if any(prefixes) else None
                prefixes = {p + ch for p in prefixes}
                continue
            if op is _sre.SUBPATTERN:
                inner = starts(list(arg[-1]))  # type: ignore[index]
                return extended(prefixes, inner)
            if op is _sre.BRANCH:
                branches: set[str] = set()
                for branch in arg[1]:  # type: ignore[index]
                    found = starts(list(branch))
                    if found is None:
                        return prefixes if any(prefixes) else None
                    branches |= found
                return extended(prefixes, branches)
            break
        return prefixes if any(prefixes) else None

    def extended(prefixes: set[str], tails: set[str] | None) -> set[str] | None:
        if tails is None or "" in tails:
            return prefixes if any(prefixes) else None
        out = {p + t for p in prefixes for t in tails}
        return out if len(out) <= _MAX_PREFIXES else (prefixes if any(prefixes) else None)

    if _sre_parse is None:  # pragma: no cover
        return None
    try:
        parsed = list(_sre_parse.parse(pattern))
    except Exception:  # pragma: no cover - compiled already, so it parses
        return None
    if not parsed or parsed[0][0] is not _sre.AT:
        return None  # only patterns that start at a word boundary are gated
    found = starts(parsed)
    if not found:
        return None
    words = {w.split(" ")[0] + (" " if " " in w else "") for w in found}
    if any(not _WORD.fullmatch(w.rstrip(" ")) for w in words):
        return None
    return frozenset(words)


def required_strings(rx: re.Pattern[str]) -> tuple[tuple[str, ...], ...] | None:
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

    def sequence(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
        needs: list[frozenset[str]] = []
        run: list[str] = []

        def close() -> None:
            if run:
                literal = frozenset({"".join(run)})
                if useful(literal):
                    needs.append(literal)
                run.clear()

        for op, arg in items:
            if op is _sre.LITERAL:
                run.append(chr(arg))
                continue
            close()
            needs.extend(n for n in item(op, arg) if useful(n))
        close()
        return needs

    def item(op: Any, arg: Any) -> list[frozenset[str]]:
        if op is _sre.SUBPATTERN:
            _group, add_flags, _del_flags, body = arg
            return [] if add_flags & re.IGNORECASE else sequence(list(body))
        if op is _sre.BRANCH:
            out: set[str] = set()
            for branch in arg[1]:
                needs = sequence(list(branch))
                if not needs:
                    return []
                out |= max(needs, key=_selectivity)
            return [frozenset(out)]
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            low, _high, body = arg
            return sequence(list(body)) if low >= 1 else []
        return []

    try:
        found = sequence(list(_sre_parse.parse(rx.pattern, rx.flags)))
    except Exception:  # pragma: no cover - compiled already, so it parses
        return None
    # The most selective first (a text fails fastest there), duplicates once.
    groups = sorted({tuple(sorted(g)) for g in found}, key=lambda g: (_selectivity(g), g))
    return tuple(reversed(groups))[:_MAX_REQUIRED] or None


def _selectivity(need: Collection[str]) -> tuple[int, int]:
    """Selective means: its shortest string is long, and there are few of them."""
    return (min(map(len, need)), -len(need))


__all__ = [
    "Pattern",
    "WordIndex",
    "compile_each",
    "first_words",
    "required_strings",
    "word_index",
]
