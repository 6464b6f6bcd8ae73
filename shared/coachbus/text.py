"""Text utilities shared by several agents (no service may import another).

Everything here is deterministic, dependency-free and linear in the length of the
text: regexes are compiled once at import time, and no function builds anything
quadratic in the number of words. English and German are supported.

The word lists are data, read once at import from ``coachbus/content/``:
``stop_words.toml`` (language detection, content stems), ``domains.toml`` (life
domains: their cues and how a reply names them), ``goals.toml`` (how a goal is
stated) and ``cues.toml`` (setback, progress and worry). This module assembles
them into regexes; the files hold no logic.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from coachbus import content as C
from coachbus.normalize import normalize

Language = Literal["en", "de"]
Register = Literal["informal", "formal"]

_WORD = re.compile(r"[A-Za-zÄÖÜäöüß]+(?:['’][A-Za-z]+)?")
# Sentence ends: ., !, ?, … or a line break; keeps abbreviations like "z.B." mostly
# intact because a split needs whitespace after the punctuation.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_SPACE = re.compile(r"\s+")

# --------------------------------------------------------------------------- language

_PKG = "coachbus.content"


def _stop_words() -> tuple[frozenset[str], frozenset[str], dict[str, frozenset[str]]]:
    doc = C.read(_PKG, "stop_words.toml")
    C.only(doc, doc.raw, ("en", "de", "other"), "")
    # Read in the normaliser's form (ä as ae, "don't" as "do not"), like every screen.
    en, de = (frozenset(normalize(C.text(doc, doc.raw.get(k), k)).split()) for k in ("en", "de"))
    other = {
        name: frozenset(normalize(C.text(doc, value, f"other.{name}")).split())
        for name, value in C.table(doc, doc.raw.get("other", {}), "other").items()
    }
    return en, de, other


_EN_STOP, _DE_STOP, _OTHER_STOP = _stop_words()
# A sentence is judged on its own only with this many words: "Let's go!" in a German
# reply is no English sentence.
FOREIGN_MIN_WORDS: Final = 6
# The margin a sentence needs to read as written in another language: this many more
# stop words of the rival language (English or German) than of its own, or this many of
# a third language and more than of English and German together.
FOREIGN_MARGIN: Final = 3
_TOKEN = re.compile(r"[a-z]+")
_UMLAUT = re.compile(r"[äöüßÄÖÜ]")


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, umlauts, apostrophe contractions)."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def word_count(text: str) -> int:
    return len(_WORD.findall(text))


def detect_language(
    text: str, hint: Language | None = None, fallback: Language | None = None
) -> Language:
    """English or German, from stop-word counts; ``hint`` wins near a tie.

    Short messages ("ok", "ja") are ambiguous, so the caller passes what it knew
    before (``fallback``) and we only switch language on clear evidence.
    """
    toks = _TOKEN.findall(normalize(text))
    en = sum(1 for t in toks if t in _EN_STOP)
    de = sum(1 for t in toks if t in _DE_STOP)
    de += min(3, len(_UMLAUT.findall(text)))
    margin = 1 if len(toks) < 6 else 2
    if de - en >= margin:
        return "de"
    if en - de >= margin:
        return "en"
    if hint is not None:
        return hint
    if fallback is not None:
        return fallback
    return "de" if de > en else "en"


# --------------------------------------------------------------------------- register

_DU = re.compile(r"\b(?:du|dich|dir|dein|deine|deinen|deinem|deiner|deines|euch|euer|eure)\b", re.I)
# Formal address is capitalised; at a sentence start "Sie" may also mean "she/they",
# so only mid-sentence occurrences count (checked in _formal_count).
_SIE = re.compile(r"\b(?:Sie|Ihnen|Ihr|Ihre|Ihren|Ihrem|Ihrer|Ihres)\b")


def _formal_count(text: str) -> int:
    n = 0
    for m in _SIE.finditer(text):
        before = text[max(0, m.start() - 4) : m.start()].rstrip()
        # Sentence-initial "Sie" is ambiguous (she/they); quotes and dashes too.
        if before and before[-1] not in '.!?:"„“-–':
            n += 1
    return n


_ASK_DU = re.compile(r"\b(?:duzen|du kannst mich duzen|sag ruhig du)\b", re.I)
_ASK_SIE = re.compile(r"\b(?:siezen|bitte sie)\b", re.I)


def detect_register(text: str) -> Register | None:
    """du (informal) / Sie (formal) as used by the user, or None if not shown."""
    if _ASK_SIE.search(text):
        return "formal"
    if _ASK_DU.search(text):
        return "informal"
    du = len(_DU.findall(text))
    sie = _formal_count(text.strip())
    if du > sie:
        return "informal"
    if sie > du:
        return "formal"
    return None


# --------------------------------------------------------------------------- sentences, quotes


def foreign_sentence(text: str, language: Language) -> str | None:
    """The language of a sentence of ``text`` written in another language than
    ``language`` (a code: "de", "en", "es", …), or None. A reply that is mostly in its
    language can still switch for a sentence ("Continua ad allenarti ogni giorno anche
    con il dolore", replies dev round 42); the whole reply's count does not see it."""
    # The whole reply first (a reply of short sentences all in Spanish), then each sentence.
    for sentence in [text, *sentences(text)]:
        toks = _TOKEN.findall(normalize(sentence))
        if len(toks) < FOREIGN_MIN_WORDS:
            continue
        en = sum(1 for t in toks if t in _EN_STOP)
        de = sum(1 for t in toks if t in _DE_STOP) + min(3, len(_UMLAUT.findall(sentence)))
        own, rival = (en, de) if language == "en" else (de, en)
        if rival - own >= FOREIGN_MARGIN:
            return "de" if language == "en" else "en"
        for name, stop in _OTHER_STOP.items():
            n = sum(1 for t in toks if t in stop)
            if n >= FOREIGN_MARGIN and n > en + de:
                return name
    return None


def sentences(text: str) -> list[str]:
    parts = (_SPACE.sub(" ", p).strip() for p in _SENTENCE_END.split(text))
    return [p for p in parts if p]


def quote(sentence: str, max_chars: int = 160) -> str:
    """A verbatim excerpt of a sentence, cut at a word boundary."""
    s = _SPACE.sub(" ", sentence).strip().strip("\"'„“”")
    if len(s) <= max_chars:
        return s
    cut = s.rfind(" ", 0, max_chars - 1)
    return s[: cut if cut > 0 else max_chars - 1].rstrip(",;:- ") + "…"


def extract_quotes(text: str) -> list[str]:
    """Passages the user put in quotation marks (e.g. what someone said to them)."""
    return [m.group(1).strip() for m in _QUOTED.finditer(text) if m.group(1).strip()]


_QUOTED = re.compile(r"[\"“„«]([^\"“”„«»]{2,200})[\"”“»]")


# --------------------------------------------------------------------------- stemming

_EN_SUFFIXES = ("ingly", "ing", "edly", "ed", "ies", "es", "ly", "s")
_DE_SUFFIXES = ("ungen", "ung", "erin", "ern", "em", "en", "er", "es", "e", "n", "s")


def stem(word: str, language: Language = "en") -> str:
    """Crude suffix stripping, enough to match "running"/"run" or "Laufen"/"laufe"."""
    w = word.lower()
    suffixes = _DE_SUFFIXES if language == "de" else _EN_SUFFIXES
    for suf in suffixes:
        if len(w) - len(suf) >= 3 and w.endswith(suf):
            w = w[: -len(suf)]
            break
    if language == "en" and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # runn -> run
    return w


def content_stems(text: str, language: Language = "en") -> list[str]:
    stop = _DE_STOP if language == "de" else _EN_STOP
    return [stem(t, language) for t in words(text) if t not in stop and len(t) > 2]


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are no stop word of English or German and longer
    than two letters: what a sentence is about when its language is not known."""
    return [t for t in words(text) if len(t) > 2 and t not in _EN_STOP and t not in _DE_STOP]


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


# --------------------------------------------------------------------------- life domains


@dataclass(frozen=True, slots=True)
class DomainLabel:
    """How a reply names a domain, so it can say "your training" instead of pasting
    the user's sentence back. German needs the case forms spelled out."""

    en: str  # noun phrase used after "your"/"the": "training", "startup plans"
    de_nom: str  # with article, nominative: "das Training"
    de_acc: str  # with article, accusative: "den Schlaf"
    de_bei: str  # "beim Training", "bei der Gründungsidee"
    de_mit: str  # "mit dem Training", "mit der Gründungsidee"

    def forms(self) -> dict[str, str]:
        """The label's placeholders ({en}, {de_bei}, …), and each German form with a
        capital first letter for a sentence that starts with it ({De_bei})."""
        out = {"en": self.en}
        for case, form in (
            ("nom", self.de_nom),
            ("acc", self.de_acc),
            ("bei", self.de_bei),
            ("mit", self.de_mit),
        ):
            out[f"de_{case}"] = form
            out[f"De_{case}"] = form[:1].upper() + form[1:]
        return out


_LABEL_KEYS = ("en", "nom", "acc", "bei", "mit")


def _label(doc: C.Doc, value: object, at: str) -> DomainLabel:
    raw = C.table(doc, value, at)
    C.only(doc, raw, _LABEL_KEYS, at)
    return DomainLabel(*(C.text(doc, raw.get(k), C.join(at, k)) for k in _LABEL_KEYS))


def _domains() -> tuple[tuple[str, ...], dict[str, str], dict[str, DomainLabel], DomainLabel]:
    doc = C.read(_PKG, "domains.toml")
    C.only(doc, doc.raw, ("generic", "domain"), "")
    generic = C.table(doc, doc.raw.get("generic"), "generic")
    C.only(doc, generic, ("label",), "generic")
    order: list[str] = []
    patterns: dict[str, str] = {}
    labels: dict[str, DomainLabel] = {}
    for i, raw in enumerate(C.array(doc, doc.raw.get("domain"), "domain")):
        at = f"domain[{i}]"
        C.only(doc, C.table(doc, raw, at), ("id", "cues", "label"), at)
        domain = C.text(doc, raw.get("id"), f"{at}.id")
        if domain in patterns:
            raise doc.fail(f"{at}.id", f"{domain!r} is listed twice")
        order.append(domain)
        patterns[domain] = C.pattern(
            doc, "|".join(C.texts(doc, raw.get("cues"), f"{at}.cues")), f"{at}.cues", re.I
        )
        labels[domain] = _label(doc, raw.get("label"), f"{at}.label")
    return tuple(order), patterns, labels, _label(doc, generic.get("label"), "generic.label")


# Life domains we can recognise, in priority order (the order of domains.toml): when a
# sentence touches several, the more specific domain names the goal ("quit my job for
# my startup" is about the startup, not about the job).
DOMAIN_ORDER, _DOMAIN_PATTERNS, DOMAIN_LABELS, GENERIC_LABEL = _domains()

DOMAIN_REGEX: dict[str, re.Pattern[str]] = {
    t: re.compile(rf"\b(?:{p})", re.I) for t, p in _DOMAIN_PATTERNS.items()
}


def domains_of(text: str) -> list[str]:
    """Life domains mentioned in the text, most specific first (DOMAIN_ORDER)."""
    return [t for t in DOMAIN_ORDER if DOMAIN_REGEX[t].search(text)]


def domain_label(domain: str | None) -> DomainLabel:
    return DOMAIN_LABELS.get(domain or "", GENERIC_LABEL)


# --------------------------------------------------------------------------- goals


def _goals() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], int]:
    doc = C.read(_PKG, "goals.toml")
    C.only(doc, doc.raw, ("en", "de", "tail", "not_a_goal", "max_words"), "")
    alts = {
        k: "|".join(C.texts(doc, doc.raw.get(k), k)) for k in ("en", "de", "tail", "not_a_goal")
    }
    body = r"(?P<goal>[^.!?;\n]+)"
    # English lead-ins end in their own whitespace ("… to "), German ones do not.
    sources = {
        "en": rf"\b(?:{alts['en']}){body}",
        "de": rf"\b(?:{alts['de']})\s+{body}",
        # Clause ends that are not part of the goal itself.
        "tail": rf"\s*(?:,\s*|\s+)(?:{alts['tail']})\b.*$",
        # "I want to tell you", "ich will ehrlich sein": speech acts, not goals.
        "not_a_goal": rf"^(?:{alts['not_a_goal']})",
    }
    rx = {k: re.compile(C.pattern(doc, v, k, re.I), re.I) for k, v in sources.items()}
    max_words = C.integer(doc, doc.raw.get("max_words"), "max_words", 1, 200)
    return rx["en"], rx["de"], rx["tail"], rx["not_a_goal"], max_words


_EN_GOAL, _DE_GOAL, _GOAL_TAIL, _NOT_A_GOAL, _MAX_GOAL_WORDS = _goals()


@dataclass(frozen=True, slots=True)
class GoalMention:
    goal_id: str
    domain: str | None
    text: str
    quote: str
    stems: tuple[str, ...]


def _clean_goal(raw: str) -> str:
    g = _GOAL_TAIL.sub("", raw).strip(" ,:-–")
    toks = g.split()
    if len(toks) > _MAX_GOAL_WORDS:
        g = " ".join(toks[:_MAX_GOAL_WORDS])
    return g


def goal_key(text: str, language: Language = "en") -> tuple[str, str | None]:
    """Stable key for a goal: its domain if recognised, else its first content stems.

    Keying by domain deliberately merges "run 3x a week" and "get back to running":
    the user's recurring intention is what matters across sessions, not the wording.
    """
    domains = domains_of(text)
    if domains:
        return domains[0], domains[0]
    stems = content_stems(text, language)[:2]
    return ("goal:" + "-".join(stems)) if stems else "goal:misc", None


def extract_goals(text: str, language: Language = "en") -> list[GoalMention]:
    """Goals the user states in this text, with the sentence they came from."""
    found: dict[str, GoalMention] = {}
    rx = _DE_GOAL if language == "de" else _EN_GOAL
    for sent in sentences(text):
        for m in rx.finditer(sent):
            raw = m.group("goal")
            if _NOT_A_GOAL.match(raw.strip()):
                continue
            g = _clean_goal(raw)
            stems = content_stems(g, language)
            if len(stems) < 1 or (len(stems) < 2 and not domains_of(g)):
                continue
            gid, domain = goal_key(g, language)
            if gid not in found:
                found[gid] = GoalMention(gid, domain, g, quote(sent), tuple(stems))
    return list(found.values())


# --------------------------------------------------------------------------- progress / setbacks


@dataclass(frozen=True, slots=True)
class SetbackCue:
    """The setback cues, read around a streak said through a negated miss: "haven't
    missed a single session" holds "haven't" and "missed" and is follow-through."""

    setback: re.Pattern[str]
    streak: re.Pattern[str]

    def search(self, text: str) -> re.Match[str] | None:
        return self.setback.search(self.streak.sub(" ", text))


def _cues() -> tuple[SetbackCue, re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    doc = C.read(_PKG, "cues.toml")
    keys = ("setback", "streak", "worry", "progress", "follow_through")
    C.only(doc, doc.raw, keys, "")
    alts = {k: "|".join(C.texts(doc, doc.raw.get(k), k)) for k in keys}
    alts["worry"] = rf"\b(?:{alts['worry']})\b"
    # A streak is a plan kept.
    alts["follow_through"] = f"{alts['follow_through']}|{alts['streak']}"
    setback, streak, worry, progress, kept = (
        re.compile(C.pattern(doc, alts[k], k, re.I), re.I) for k in alts
    )
    return SetbackCue(setback, streak), worry, progress, kept


# Check a sentence for a setback first: "nicht geschafft" also contains "geschafft".
# Worry about the future is not a report: "afraid I won't manage again".
SETBACK_RX, WORRY_RX, PROGRESS_RX, FOLLOW_THROUGH_RX = _cues()


# --------------------------------------------------------------------------- markers


def marker_regex(markers: Sequence[str]) -> re.Pattern[str] | None:
    """One compiled alternation matching any marker on word boundaries."""
    alts = [re.escape(m.strip().lower()).replace(r"\ ", r"\s+") for m in markers if m.strip()]
    if not alts:
        return None
    return re.compile(r"(?<![\wäöüß])(?:" + "|".join(alts) + r")(?![\wäöüß])", re.I)


def find_markers(text: str, markers: Sequence[str]) -> list[str]:
    """Markers (lower-case phrases) present in the text, word-boundary aware."""
    rx = marker_regex(markers)
    if rx is None:
        return []
    return sorted({_SPACE.sub(" ", m.group(0).lower()) for m in rx.finditer(text)})


# --------------------------------------------------------------------------- variation


def seed_of(*parts: str) -> int:
    """A stable small integer from strings (e.g. a turn id), to pick phrasing variants."""
    h = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=4).digest()
    return int.from_bytes(h, "big")


_T = TypeVar("_T")


def pick(options: Sequence[_T], seed: int, salt: int = 0) -> _T:
    """A deterministic choice among variants: the same seed always picks the same one."""
    return options[(seed + salt * 7919) % len(options)]


# --------------------------------------------------------------------------- localised phrases


# The one placeholder vocabulary of every sentence a reply is built from (Coach's,
# Synth's, the catalogue's): the domain label's forms, and the slots a renderer fills.
DOMAIN_PLACEHOLDERS: frozenset[str] = frozenset(GENERIC_LABEL.forms())
SLOTS: dict[str, str] = {
    "safer": "a risky step's safer alternative, in the reply's language",
    "step": "the concrete step (an if-then plan, an anchor, a reframe)",
    "stretch": "a raised bar, when things go well",
    "quote": "the user's own short words",
    "nth": "an ordinal: second, third (zweite, dritte)",
}
PLACEHOLDERS: frozenset[str] = DOMAIN_PLACEHOLDERS | frozenset(SLOTS)


@dataclass(frozen=True, slots=True)
class Phrase:
    """One sentence in English and in German with du and with Sie.

    German needs both registers written out by hand: swapping pronouns mechanically
    breaks verb forms ("Du hast" / "Sie haben"). In the data files a sentence whose
    du and Sie forms are the same is written once (``de = ...``).
    """

    en: str
    du: str
    sie: str

    def get(self, language: Language, register: Register = "formal") -> str:
        if language == "de":
            return self.du if register == "informal" else self.sie
        return self.en

    def fill(
        self,
        language: Language,
        register: Register = "formal",
        label: DomainLabel | None = None,
        **slots: str | Phrase,
    ) -> str:
        """The sentence with its placeholders filled and its first letter capitalised.

        Placeholders (PLACEHOLDERS) are the label's forms ({en}, {de_bei}, {De_bei}, …)
        and the SLOTS passed by name; a slot given as a Phrase is read in ``language``
        (an ordinal, a safer alternative). A placeholder without a value is an error.
        """
        unknown = set(slots) - set(SLOTS)
        if unknown:
            raise KeyError(f"unknown placeholders {sorted(unknown)}; known: {sorted(SLOTS)}")
        values = label.forms() if label is not None else {}
        for name, value in slots.items():
            values[name] = value.get(language, register) if isinstance(value, Phrase) else value
        s = self.get(language, register).format_map(values)
        return s[:1].upper() + s[1:]

    def placeholders(self) -> set[str]:
        """Every placeholder any of the three forms uses."""
        return {
            name
            for form in (self.en, self.du, self.sie)
            for _, name, _, _ in string.Formatter().parse(form)
            if name is not None
        }
