"""Text utilities shared by several agents (no service may import another).

Everything here is deterministic, dependency-free and linear in the length of the
text: regexes are compiled once at import time, and no function builds anything
quadratic in the number of words. English and German are supported.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from coachbus.normalize import normalize

Language = Literal["en", "de"]
Register = Literal["informal", "formal"]

_WORD = re.compile(r"[A-Za-zÄÖÜäöüß]+(?:['’][A-Za-z]+)?")
# Sentence ends: ., !, ?, … or a line break; keeps abbreviations like "z.B." mostly
# intact because a split needs whitespace after the punctuation.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\n+")
_SPACE = re.compile(r"\s+")

# --------------------------------------------------------------------------- language

_EN_STOP_WORDS = (
    "the a an and or but i you he she it we they my your is are was were be been have has "
    "had do does did not no to of in on at for with this that what how why when just so "
    "me myself am can can't don't didn't won't i'm i've i'll it's again really want "
    "would should could week today tomorrow yesterday work because about"
)
_DE_STOP_WORDS = (
    "der die das und oder aber ich du er sie es wir ihr mein meine dein deine ist sind war "
    "waren sein bin bist habe hast hat haben nicht kein keine zu von im in am an auf für mit "
    "dies diese dieser was wie warum wann nur so mich mir dich dir wieder wirklich will möchte "
    "sollte könnte woche heute morgen gestern arbeit weil über schon noch auch doch mal einen "
    "eine einem einer den dem des ja nein"
)
# Read in the normaliser's form (ä as ae, "don't" as "do not"), like every screen.
_EN_STOP = frozenset(normalize(_EN_STOP_WORDS).split())
_DE_STOP = frozenset(normalize(_DE_STOP_WORDS).split())
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


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


# --------------------------------------------------------------------------- topics

# Life domains we can recognise, in priority order: when a sentence touches several,
# the more specific domain names the goal ("quit my job for my startup" is about the
# startup, not about the job).
TOPIC_ORDER: tuple[str, ...] = (
    "business",
    "writing",
    "music",
    "fitness",
    "nutrition",
    "sleep",
    "study",
    "mindfulness",
    "screen_time",
    "substances",
    "household",
    "money",
    "relationships",
    "work",
)

_TOPIC_PATTERNS: dict[str, str] = {
    "business": r"start-?ups?|side[- ]?(?:project|hustle|business)|(?:my|own|a) business|"
    r"founder|found(?:ing)? a company|gründ\w*|selbstständig\w*|selbständig\w*|"
    r"(?:eigene[nm]?|meine[nm]?) (?:firma|laden|café|unternehmen)|geschäftsidee|kunden|customers?",
    "writing": r"writ\w*|wrote|novel|book|blog\w*|chapters?|manuscript|essay|"
    r"schreib\w*|geschrieben|roman\w*|buch\b|kapitel|manuskript",
    "music": r"guitar|piano|sing\w*|music\w*|instrument|gitarre|klavier|musik\w*|üben",
    "fitness": r"run\b|runs\b|running|ran\b|jog\w*|gym|workouts?|exercis\w*|training|train\b|"
    r"marathon|\d+k\b|yoga|swim\w*|cycling|bike|lauf\w*|laufen|gelaufen|joggen|sport\w*|"
    r"fitness\w*|schwimm\w*|rad fahren|radfahren|trainier\w*",
    "nutrition": r"diet\w*|eat\w*|ate\b|sugar|snack\w*|weight|calorie\w*|lose \d+ ?(?:kg|pounds)|"
    r"cook\w*|meal\w*|abnehm\w*|ernähr\w*|essen|gegessen|zucker|süßigkeiten|kilo|diät\w*|kochen",
    "sleep": r"sleep\w*|slept|bed(?:time)?\b|insomnia|tired|schlaf\w*|geschlafen|müde|ins bett",
    "study": r"stud(?:y|ying|ied)|exams?|thesis|course\w*|learn\w*|spanish|french|"
    r"lern\w*|prüfung\w*|klausur\w*|studium|bachelorarbeit|masterarbeit|kurs\w*|sprache",
    "mindfulness": r"meditat\w*|journal\w*|mindful\w*|breath\w*|tagebuch|achtsam\w*|atem\w*",
    "screen_time": r"phone|instagram|tiktok|social media|scroll\w*|netflix|youtube|gaming|"
    r"handy|serien?|zocken|bildschirm",
    "substances": r"smok\w*|cigarettes?|alcohol|drinking|beer|wine|vap\w*|rauch\w*|"
    r"zigarett\w*|alkohol|bier|wein",
    "household": r"clean\w*|tidy\w*|declutter\w*|laundry|apartment|flat\b|aufräum\w*|"
    r"putzen|wohnung|haushalt|wäsche|ausmisten",
    "money": r"sav(?:e|ing|ings)\b|money|budget\w*|debts?|loan|invest\w*|spar\w*|geld|"
    r"schulden|kredit|ersparnis\w*|erspartes|finanz\w*",
    "relationships": r"partner|wife|husband|girlfriend|boyfriend|kids?|children|family|"
    r"friends?|mum|mom|dad|mother|father|sister|brother|familie|freund\w*|kinder|"
    r"mann\b|frau\b|mutter|vater|schwester|bruder|eltern",
    "work": r"job|boss|career|office|colleagues?|manager|promotion|work\b|working|notice\b|"
    r"resign\w*|kündig\w*|"
    r"beruf\w*|arbeit\w*|chef\w*|kolleg\w*|büro|karriere|beförder\w*|stelle\b",
}

TOPIC_REGEX: dict[str, re.Pattern[str]] = {
    t: re.compile(rf"\b(?:{p})", re.I) for t, p in _TOPIC_PATTERNS.items()
}


def topics_of(text: str) -> list[str]:
    """Topics mentioned in the text, most specific first (TOPIC_ORDER)."""
    return [t for t in TOPIC_ORDER if TOPIC_REGEX[t].search(text)]


@dataclass(frozen=True, slots=True)
class TopicLabel:
    """How a reply names a domain, so it can say "your training" instead of pasting
    the user's sentence back. German needs the case forms spelled out."""

    en: str  # noun phrase used after "your"/"the": "training", "startup plans"
    de_nom: str  # with article, nominative: "das Training"
    de_acc: str  # with article, accusative: "den Schlaf"
    de_bei: str  # "beim Training", "bei der Gründungsidee"
    de_mit: str  # "mit dem Training", "mit der Gründungsidee"


TOPIC_LABELS: dict[str, TopicLabel] = {
    "business": TopicLabel(
        "startup",
        "die Gründungsidee",
        "die Gründungsidee",
        "bei der Gründungsidee",
        "mit der Gründungsidee",
    ),
    "writing": TopicLabel(
        "writing", "das Schreiben", "das Schreiben", "beim Schreiben", "mit dem Schreiben"
    ),
    "music": TopicLabel("practice", "das Üben", "das Üben", "beim Üben", "mit dem Üben"),
    "fitness": TopicLabel(
        "training", "das Training", "das Training", "beim Training", "mit dem Training"
    ),
    "nutrition": TopicLabel(
        "eating", "die Ernährung", "die Ernährung", "bei der Ernährung", "mit der Ernährung"
    ),
    "sleep": TopicLabel("sleep", "der Schlaf", "den Schlaf", "beim Schlaf", "mit dem Schlaf"),
    "study": TopicLabel("studying", "das Lernen", "das Lernen", "beim Lernen", "mit dem Lernen"),
    "mindfulness": TopicLabel(
        "practice", "die Übung", "die Übung", "bei der Übung", "mit der Übung"
    ),
    "screen_time": TopicLabel(
        "screen time",
        "die Bildschirmzeit",
        "die Bildschirmzeit",
        "bei der Bildschirmzeit",
        "mit der Bildschirmzeit",
    ),
    "substances": TopicLabel(
        "habit", "die Gewohnheit", "die Gewohnheit", "bei der Gewohnheit", "mit der Gewohnheit"
    ),
    "household": TopicLabel(
        "home", "der Haushalt", "den Haushalt", "beim Haushalt", "mit dem Haushalt"
    ),
    "money": TopicLabel(
        "finances", "die Finanzen", "die Finanzen", "bei den Finanzen", "mit den Finanzen"
    ),
    "relationships": TopicLabel(
        "relationships",
        "die Beziehungen",
        "die Beziehungen",
        "in den Beziehungen",
        "mit den Beziehungen",
    ),
    "work": TopicLabel("work", "die Arbeit", "die Arbeit", "bei der Arbeit", "mit der Arbeit"),
}
GENERIC_LABEL = TopicLabel(
    "plan", "das Vorhaben", "das Vorhaben", "beim Vorhaben", "mit dem Vorhaben"
)


def topic_label(topic: str | None) -> TopicLabel:
    return TOPIC_LABELS.get(topic or "", GENERIC_LABEL)


# --------------------------------------------------------------------------- goals

_EN_GOAL = re.compile(
    r"\b(?:i\s+(?:really\s+|still\s+|finally\s+|also\s+|just\s+|seriously\s+)?"
    r"(?:want|wanna|need|plan|intend|hope|aim|mean|'d\s+like|would\s+like|'m\s+going|"
    r"am\s+going|'m\s+gonna|am\s+gonna|will|'ll|have\s+decided|'ve\s+decided|decided|"
    r"'m\s+determined|am\s+determined)\s+(?:to\s+)?|"
    r"my\s+(?:main\s+|big\s+|new\s+|real\s+)?(?:goal|plan|aim|resolution|dream)\s+"
    r"(?:is|was|for\s+\w+\s+is)\s+(?:to\s+)?|"
    r"this\s+(?:week|month|year|time)\s+i(?:'ll|\s+will|\s+want\s+to)\s+)"
    r"(?P<goal>[^.!?;\n]+)",
    re.I,
)
_DE_GOAL = re.compile(
    r"\b(?:ich\s+(?:will|möchte|werde|plane|wollte|würde\s+gerne?|hätte\s+gerne?|"
    r"nehme\s+mir\s+vor|habe\s+mir\s+vorgenommen,?|hab\s+mir\s+vorgenommen,?|"
    r"habe\s+vor,?|hab\s+vor,?)|"
    r"mein\s+(?:großes\s+|neues\s+|eigentliches\s+)?(?:ziel|vorsatz|plan|traum)\s+"
    r"(?:ist|war)(?:\s+es)?,?|"
    r"diese\s+woche\s+(?:will|möchte|werde)\s+ich|"
    # Verb-second order after an adverb: "Außerdem will ich …", "Jetzt möchte ich …".
    r"(?:außerdem|jetzt|dann|auch|endlich|nun|ab\s+sofort|dieses\s+jahr)\s+"
    r"(?:will|möchte|werde)\s+ich(?:\s+(?:auch|endlich|unbedingt|wirklich))?)"
    r"\s+(?P<goal>[^.!?;\n]+)",
    re.I,
)
# Clause ends that are not part of the goal itself.
_GOAL_TAIL = re.compile(
    r"\s*(?:,\s*|\s+)(?:but|because|since|although|though|so that|and then i|aber|weil|"
    r"obwohl|denn|doch|jedoch)\b.*$",
    re.I,
)
# "I want to tell you", "ich will ehrlich sein": speech acts, not goals.
_NOT_A_GOAL = re.compile(
    r"^(?:tell|know|say|ask|admit|mention|be honest|talk|explain|understand|share|see|"
    r"thank|apologi[sz]e|hear|check|make sure you|not|never|nicht|kein\w*|nie\b|"
    r"dir\s+(?:sagen|erzählen)|ihnen\s+(?:sagen|erzählen)|ehrlich|sagen|wissen|fragen|"
    r"erzählen|mal\s+(?:sagen|fragen)|dass\b|that\b|this\b|it\b|das\b|es\b)",
    re.I,
)
_MAX_GOAL_WORDS = 18


@dataclass(frozen=True, slots=True)
class GoalMention:
    goal_id: str
    topic: str | None
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
    tops = topics_of(text)
    if tops:
        return tops[0], tops[0]
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
            if len(stems) < 1 or (len(stems) < 2 and not topics_of(g)):
                continue
            gid, topic = goal_key(g, language)
            if gid not in found:
                found[gid] = GoalMention(gid, topic, g, quote(sent), tuple(stems))
    return list(found.values())


# --------------------------------------------------------------------------- progress / setbacks

# Check a sentence for a setback first: "nicht geschafft" also contains "geschafft".
SETBACK_RX = re.compile(
    r"\b(?:didn'?t|did not|haven'?t|have not|hasn'?t|couldn'?t|wasn'?t able|never got|"
    r"failed to|forgot to)\b|\bskipped|\bmissed\b|gave up|fell off|not once|zero times|"
    r"nothing happened|no progress|blew it|broke my streak|back to zero|\bis stuck\b|"
    r"stuck again|komme nicht weiter|hängt fest|"
    r"nicht geschafft|wieder nicht|nicht gemacht|ausgelassen|verpasst|aufgegeben|"
    r"nicht dazu gekommen|nicht hingekriegt|kein einziges mal|nie gemacht|keinmal|"
    r"habe? (?:es |das )?nicht|war nicht|hab(?:e)? keine? (?:zeile|minute|runde)",
    re.I,
)
# Worry about the future is not a report: "afraid I won't manage again".
WORRY_RX = re.compile(
    r"\b(?:afraid|scared|worried|worry|fear|angst|sorge\w*|fürchte|befürchte)\b", re.I
)
PROGRESS_RX = re.compile(
    r"\bi did it\b|\bmanaged to\b|\bi went (?:for a |to the |running|out for)|\bi ran\b|"
    r"\bfinished\b|\bcompleted\b|\bi wrote\b|kept it up|stuck to\b|actually did|got it done|"
    r"\bmade it\b|ticked off|\bi(?:'ve| have) been (?:running|writing|going|practi[sc]ing|"
    r"saving|meditating|sleeping better)|(?:twice|three times|\d+ times) this week|"
    r"on track|\bstreak\b|wrote \d+|\bran \d+|"
    r"geschafft|durchgezogen|drangeblieben|erledigt|eingehalten|hingekriegt|"
    r"war (?:\w+ ){0,3}(?:laufen|joggen|schwimmen|im fitnessstudio)|bin (?:\w+ ){0,3}gelaufen|"
    r"klappt (?:es |das )?(?:\w+ )?(?:besser|gut)|läuft (?:es |das )?(?:\w+ )?(?:besser|gut)|"
    r"going (?:much |a lot )?better|went well|is working|"
    r"habe? (?:\w+ ){0,4}(?:geschrieben|gelernt|geübt|meditiert|gespart)|"
    r"(?:zweimal|dreimal|\d+ mal) (?:diese|letzte) woche",
    re.I,
)


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


@dataclass(frozen=True, slots=True)
class Phrase:
    """One sentence in English and in German with du and with Sie.

    German needs both registers written out by hand: swapping pronouns mechanically
    breaks verb forms ("Du hast" / "Sie haben").
    """

    en: str
    du: str
    sie: str

    def get(self, language: Language, register: Register = "formal") -> str:
        if language == "de":
            return self.du if register == "informal" else self.sie
        return self.en
