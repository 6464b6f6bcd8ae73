"""One normaliser for every text screen (crisis, risky steps, language).

People type on phones: typographic apostrophes (``can’t``, the iOS/macOS default),
German umlauts written as ae/oe/ue, stretched letters ("sooo tired", "dieee"), no
capitals and no punctuation, and abbreviations ("kms", "wanna"). A screen that
matches the textbook spelling only misses exactly the messages that are written in
a hurry, which is when they matter most. So every screen reads the same canonical
form, and every pattern is written against that form:

* Unicode NFKC (full-width letters, ligatures, compatibility forms);
* typographic quotes, apostrophes and dashes mapped to ASCII;
* case folded (``casefold`` also turns ß into ss);
* German umlauts folded to their two-letter spelling (ä → ae, ö → oe, ü → ue), so
  "möchte" and "moechte" are one word;
* English contractions spelled out before apostrophes go ("he'll" → "he will", not
  "hell"; "i'm" → "i am"; "won't" → "will not"); the same words typed without the
  apostrophe ("im", "ill", "id") stay as typed, since they are words of their own;
* other apostrophes inside words dropped ("wär's" and "wärs" are one word);
* "kms" after a number or a quantity word is kilometres ("ran 5 kms" → "ran 5 km",
  "how many kms"), not the slang;
* a letter repeated three or more times collapsed to one ("dieee" → "die");
* abbreviations and slang expanded word by word from a data file
  (``content/abbreviations.toml``), so "kms" reads "kill myself";
* white space collapsed.

The result keeps sentence punctuation (. , ! ?), so a screen can still tell where a
negation's reach ends. Patterns written for the screens are folded with
:func:`fold_pattern` so a rule may be written with real umlauts.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

_TYPOGRAPHIC = str.maketrans(
    {
        "’": "'",
        "‘": "'",
        "‚": "'",
        "‛": "'",
        "ʼ": "'",
        "´": "'",
        "`": "'",
        "“": '"',
        "”": '"',
        "„": '"',
        "‟": '"',
        "«": '"',
        "»": '"',
        "‹": "'",
        "›": "'",
        "–": "-",
        "—": "-",
        "‒": "-",
        "―": "-",
        "‑": "-",
        "−": "-",
        "…": "...",
        "\u00a0": " ",
        # Zero-width characters hide nothing from a screen.
        "\u200b": None,
        "\u200c": None,
        "\u200d": None,
        "\u2060": None,
        "\ufeff": None,
        "\u00ad": None,
    }
)
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})
# An apostrophe between letters: a contraction or elision (can't, i'm, wär's).
_INNER_APOSTROPHE = re.compile(r"(?<=[a-z])'(?=[a-z])")
_REPEATED = re.compile(r"([a-z])\1{2,}")
# Contractions with one reading each, spelled out before apostrophes are dropped.
_SPELLED = {"ll": "will", "re": "are", "ve": "have", "m": "am", "d": "would"}
_CONTRACTIONS = (
    (
        re.compile(r"\b(wo|ca|sha)n't\b"),
        lambda m: {"wo": "will not", "ca": "cannot", "sha": "shall not"}[m.group(1)],
    ),
    (re.compile(r"\bain't\b"), lambda m: "is not"),
    (re.compile(r"(?<=[a-z])n't\b"), lambda m: " not"),
    (
        re.compile(r"(?<=[a-z])'(ll|re|ve|m|d)\b"),
        lambda m: " " + _SPELLED[m.group(1)],
    ),
)
# "kms" after a number or a quantity word is kilometres ("ran 5 kms", "how many kms
# per week"); "kms" on its own stays the slang.
_KILOMETRES = re.compile(
    r"\b(\d+(?:[.,]\d+)?|many|few|more|less|extra|those|these|wie viele|viele|paar) ?kms\b"
)
_SPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"[a-z0-9]+")


@cache
def _abbreviations() -> dict[str, str]:
    raw = resources.files("coachbus.content").joinpath("abbreviations.toml").read_text("utf-8")
    table: dict[str, str] = {}
    for section in tomllib.loads(raw).values():
        for short, long in section.items():
            table[_fold(short)] = _fold(long)
    return table


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).casefold()
    text = text.translate(_UMLAUTS)
    for rx, spelled in _CONTRACTIONS:
        text = rx.sub(spelled, text)
    text = _INNER_APOSTROPHE.sub("", text)
    return _REPEATED.sub(r"\1", text)


@cache
def _abbreviation_rx() -> re.Pattern[str]:
    """The whole tokens (maximal ``[a-z0-9]+`` runs, like ``_TOKEN``) that are
    abbreviations: only those are looked up, not every word of the text."""
    keys = sorted((k for k in _abbreviations() if _TOKEN.fullmatch(k)), key=len, reverse=True)
    if not keys:
        return re.compile(r"(?!)")
    alternation = "|".join(re.escape(k) for k in keys)
    return re.compile(rf"(?<![a-z0-9])(?:{alternation})(?![a-z0-9])")


def normalize(text: str) -> str:
    """The canonical form every screen reads (see the module docstring)."""
    if len(text) <= _MEMO_MAX_CHARS:
        return _normalize_memo(text)
    return _normalize(text)


def _normalize(text: str) -> str:
    folded = _KILOMETRES.sub(r"\1 km", _fold(text))
    table = _abbreviations()
    expanded = _abbreviation_rx().sub(lambda m: table[m.group(0)], folded)
    return _SPACE.sub(" ", expanded).strip()


# The same text is normalised by several readers of one turn (the crisis screen,
# language detection, quote checks, the safety screens): memoised for texts up to a
# few KB, so the memo stays small; strings are immutable, so sharing is safe.
_MEMO_MAX_CHARS = 8192
_normalize_memo = lru_cache(maxsize=512)(_normalize)


@dataclass(frozen=True, slots=True)
class NormalizedText:
    """A message as typed (``raw``) and in the form every screen reads (``text``).

    A turn's message is normalised once and this value is handed to each screen that
    reads it (crisis, conversation, risky steps), so they all read one form and none
    normalises the same text again."""

    raw: str
    text: str

    @classmethod
    def of(cls, raw: str) -> NormalizedText:
        return cls(raw, normalize(raw))


def normalized(text: str | NormalizedText) -> NormalizedText:
    """``text`` as a :class:`NormalizedText`: normalised now when it is a plain string,
    as it is when a caller already normalised it."""
    return text if isinstance(text, NormalizedText) else NormalizedText.of(text)


def fold_pattern(pattern: str) -> str:
    """A regex written in ordinary spelling, folded like :func:`normalize` folds text.

    Only literal letters change (ä → ae, ß → ss, lower case); a character class that
    contains an umlaut would change meaning when folded, so it is refused.
    """
    if re.search(r"\[[^\]]*[äöüßÄÖÜ][^\]]*\]", pattern):
        raise ValueError(f"write umlauts outside character classes: {pattern!r}")
    text = unicodedata.normalize("NFKC", pattern).translate(_TYPOGRAPHIC)
    # Lower-case literals only: an escape's letter is its meaning (\W is not \w).
    text = _LITERAL.sub(
        lambda m: m.group(0) if m.group(0).startswith("\\") else m.group(0).lower(), text
    )
    return text.translate(_UMLAUTS).replace("ß", "ss")


_LITERAL = re.compile(r"\\.|[^\\]")


__all__ = ["NormalizedText", "fold_pattern", "normalize", "normalized"]
