"""Help lines per locale, from a data file an operator can correct without a release.

The table is ``coachbus/content/helplines.toml``, or the operator's file the setting
``helplines_file`` names (``COACHBUS_HELPLINES_FILE``). Whose lines a reply shows:

* the locale the setting ``locale`` names (``COACHBUS_LOCALE``), when set: every user
  gets that country's numbers, in sentences of their own language;
* otherwise the file's default for the user's language (English: the US, UK and Irish
  lines with 112 and 911; German: Germany's).

A locale holds numbers and names only. The sentences are templates per language (German
in du and Sie) that the locale's lines are filled into, so a new country is one small
table. The file is checked as it loads (every locale has every category, every template
names only known placeholders, numbers look like numbers).

Lookups are pure: a :class:`HelplineTable` and a locale in, sentences out; nothing here
reads the environment. A service that shows help lines loads them once as it starts
(:meth:`Helplines.configured`, from its settings) and passes them to whatever builds a
reply, so a broken file or an unknown locale stops the service before its first turn,
never in the middle of a crisis. :data:`SHIPPED` is the shipped table with each user's
language default (tests, the eval, tools).
"""

from __future__ import annotations

import logging
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

from coachbus.contracts.payloads import CrisisCategory
from coachbus.text import Language, Phrase, Register

log = logging.getLogger(__name__)

SHIPPED_FILE = "coachbus/content/helplines.toml"

Kind = Literal["emergency", "lifeline", "abuse", "medical"]
KINDS: tuple[Kind, ...] = get_args(Kind)
LANGUAGES: tuple[Language, ...] = get_args(Language)
# What a crisis reply offers, in this order, per category.
SHOWN: dict[CrisisCategory, tuple[Kind, ...]] = {
    CrisisCategory.SUICIDAL_IDEATION: ("emergency", "lifeline"),
    CrisisCategory.SELF_HARM: ("emergency", "lifeline"),
    CrisisCategory.ABUSE: ("emergency", "abuse", "lifeline"),
    CrisisCategory.MEDICAL_EMERGENCY: ("medical",),
    CrisisCategory.NONE: (),
}
_SENTENCES = (*KINDS, "reminder")
_WORDS = ("or", "on", "free", "day_and_night", "sms")
_WEB = ("title", "intro", *KINDS)
_LINE_KEYS = {"number", "name", "note", "free", "day_and_night", "sms", "source", "verified"}
_NUMBER = re.compile(r"\+?\d(?:[\d -]*\d)?")
# Characters Synth's validator takes for merge artefacts ([brackets], {JSON}, <tags>,
# snake_case): a name or note with one would make every crisis reply fail validation.
_ARTEFACT = re.compile(r"[\[\]{}<>_]")


class HelplinesError(ValueError):
    """The help-lines file is malformed, or names no such locale."""


@dataclass(frozen=True, slots=True)
class Line:
    """One service: its numbers (the first is the one a reply must carry) and flags."""

    numbers: tuple[str, ...]
    name: Phrase | None
    note: Phrase | None
    free: bool
    day_and_night: bool
    sms: bool
    source: str
    verified: date | None

    def details(self, language: Language, words: Mapping[str, str]) -> str:
        """The bracketed qualifiers: "US, call or text, free, day and night"."""
        parts = [
            self.note.get(language) if self.note else "",
            words["sms"] if self.sms else "",
            words["free"] if self.free else "",
            words["day_and_night"] if self.day_and_night else "",
        ]
        return ", ".join(p for p in parts if p)

    def render(self, language: Language, words: Mapping[str, str]) -> str:
        numbers = f" {words['or']} ".join(self.numbers)
        text = f"{self.name.get(language)} {words['on']} {numbers}" if self.name else numbers
        details = self.details(language, words)
        return f"{text} ({details})" if details else text


@dataclass(frozen=True, slots=True)
class Locale:
    tag: str
    region: Phrase
    lines: Mapping[Kind, tuple[Line, ...]]


@dataclass(frozen=True, slots=True)
class HelplineTable:
    """The loaded, checked file; ``source`` says which file it came from.

    Every lookup takes the locale: a tag of the file, or None for the default of the
    user's language."""

    source: str
    locales: Mapping[str, Locale]
    defaults: Mapping[Language, str]
    sentences: Mapping[str, Phrase]
    words: Mapping[Language, Mapping[str, str]]
    web: Mapping[Language, Mapping[str, str]]

    @property
    def known(self) -> tuple[str, ...]:
        """Every value the locale setting (COACHBUS_LOCALE) may take."""
        return tuple(sorted(set(self.locales) | set(self.defaults)))

    def canonical(self, tag: str) -> str:
        """The file's spelling of ``tag`` (``de_at`` → ``de-AT``); an unknown tag is an error."""
        wanted = tag.strip().replace("_", "-").lower()
        for known in self.known:
            if known.lower() == wanted:
                return known
        raise HelplinesError(
            f"unknown help-line locale {tag!r} (COACHBUS_LOCALE); known: "
            f"{', '.join(self.known)} (from {self.source})"
        )

    def locale(self, language: Language, tag: str | None = None) -> Locale:
        """The locale ``tag`` names, else the language's default."""
        key = self.canonical(tag) if tag else self.defaults[language]
        if key not in self.locales:  # a bare language ("de"): its default
            key = self.defaults[key]  # type: ignore[index]
        return self.locales[key]

    def _sentence(self, kind: str, language: Language, register: Register, at: Locale) -> str:
        words = self.words[language]
        filled: dict[str, str] = {}
        for k in KINDS:
            items = [line.render(language, words) for line in at.lines[k]]
            tail = f" {words['or']} ".join(items[-2:])
            filled[k] = ", ".join([*items[:-2], tail])
        return self.sentences[kind].get(language, register).format_map(filled)

    def lines(
        self,
        category: CrisisCategory,
        language: Language,
        register: Register,
        locale: str | None = None,
    ) -> list[str]:
        """The help-line sentences a crisis reply of ``category`` offers."""
        at = self.locale(language, locale)
        return [self._sentence(kind, language, register, at) for kind in SHOWN[category]]

    def reminder(self, language: Language, register: Register, locale: str | None = None) -> str:
        """One sentence keeping the help lines in view on the turn after a crisis."""
        return self._sentence("reminder", language, register, self.locale(language, locale))

    def lifeline(self, language: Language, register: Register, locale: str | None = None) -> str:
        """The crisis-line sentence alone (someone to talk to, no emergency number)."""
        return self._sentence("lifeline", language, register, self.locale(language, locale))

    def required_numbers(
        self, category: CrisisCategory, language: Language, locale: str | None = None
    ) -> tuple[str, ...]:
        """The numbers a crisis reply must contain: the first of every line it offers."""
        at = self.locale(language, locale)
        firsts = (line.numbers[0] for kind in SHOWN[category] for line in at.lines[kind])
        return tuple(dict.fromkeys(firsts))

    def as_json(self, language: Language, locale: str | None = None) -> dict[str, Any]:
        """The lines for the web chat, with its labels, in ``language``."""
        at = self.locale(language, locale)
        words, web = self.words[language], self.web[language]
        return {
            "locale": at.tag,
            "language": language,
            "region": at.region.get(language),
            "title": web["title"],
            "intro": web["intro"],
            "groups": [
                {
                    "kind": kind,
                    "label": web[kind],
                    "lines": [
                        {
                            "name": line.name.get(language) if line.name else None,
                            "numbers": list(line.numbers),
                            "details": line.details(language, words),
                        }
                        for line in at.lines[kind]
                    ],
                }
                for kind in KINDS
            ],
        }

    def unverified(self) -> list[str]:
        """``locale/category/number`` of every line without a ``verified`` date."""
        return [
            f"{tag}/{kind}/{line.numbers[0]}"
            for tag, at in self.locales.items()
            for kind in KINDS
            for line in at.lines[kind]
            if line.verified is None
        ]


@dataclass(frozen=True, slots=True)
class Helplines:
    """The help lines a service offers: a checked table and the locale it is set to
    (None: each user's language default). Built once, as the service starts."""

    table: HelplineTable
    locale: str | None = None

    @classmethod
    def configured(cls, path: str | Path | None, locale: str | None) -> Helplines:
        """The help lines a service offers, from its settings (``helplines_file`` and
        ``locale``): the file read and checked, the locale looked up in it. Called as
        the service starts, so a broken file or an unknown locale stops it there
        (:class:`HelplinesError`, naming the file and the place of the mistake)."""
        table = load(path) if path else shipped_table()
        missing = table.unverified()
        if missing:
            log.warning(
                "%d of the help lines in %s carry no `verified` date (e.g. %s): check each "
                "at its source before shipping",
                len(missing),
                table.source,
                missing[0],
            )
        return cls(table, table.canonical(locale) if locale else None)

    def lines(self, category: CrisisCategory, language: Language, register: Register) -> list[str]:
        """The help-line sentences a crisis reply of ``category`` offers."""
        return self.table.lines(category, language, register, self.locale)

    def reminder(self, language: Language, register: Register) -> str:
        """One sentence keeping the help lines in view on the turn after a crisis."""
        return self.table.reminder(language, register, self.locale)

    def lifeline(self, language: Language, register: Register) -> str:
        """The crisis-line sentence alone: what a check-in on an uncertain message offers
        (a direct question and someone to talk to, without the emergency number's alarm)."""
        return self.table.lifeline(language, register, self.locale)

    def required_numbers(self, category: CrisisCategory, language: Language) -> tuple[str, ...]:
        """The numbers a crisis reply must contain (what validators check)."""
        return self.table.required_numbers(category, language, self.locale)

    def as_json(self, language: Language) -> dict[str, Any]:
        """The lines for the web chat, with its labels, in ``language``."""
        return self.table.as_json(language, self.locale)


# --------------------------------------------------------------------------- loading


def load(path: str | Path | None = None) -> HelplineTable:
    """Read and check the file at ``path``, or the shipped table when there is none."""
    source = str(path) if path else SHIPPED_FILE
    try:
        if path:
            text = Path(path).read_text(encoding="utf-8")
        else:
            text = resources.files("coachbus.content").joinpath("helplines.toml").read_text("utf-8")
        return _parse(tomllib.loads(text), source)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HelplinesError(f"help lines {source}: {exc}") from exc


@cache
def shipped_table() -> HelplineTable:
    """The shipped table, read once per process."""
    return load()


# --------------------------------------------------------------------------- checking


def _table(raw: Mapping[str, Any], key: str, at: str = "") -> dict[str, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        raise HelplinesError(f"{at + '.' if at else ''}{key}: missing, or not a table")
    return value


def _only(found: Mapping[str, Any], allowed: set[str] | tuple[str, ...], at: str) -> None:
    unknown = set(found) - set(allowed)
    if unknown:
        raise HelplinesError(f"{at}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")


def _text(value: object, at: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise HelplinesError(f"{at}: must be a non-empty string")
    return value


def _per_language(value: object, at: str) -> Phrase:
    """A string for every language, or ``{ en = ..., de = ... }``."""
    if isinstance(value, dict):
        _only(value, LANGUAGES, at)
        en, de = (_text(value.get(lang), f"{at}.{lang}") for lang in LANGUAGES)
    else:
        en = de = _text(value, at)
    for text in (en, de):
        if _ARTEFACT.search(text):
            raise HelplinesError(f"{at}: {text!r} has a character replies may not carry")
    return Phrase(en, de, de)


def _template(value: object, at: str) -> str:
    text = _text(value, at)
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise HelplinesError(f"{at}: {exc}") from exc
    if not fields <= set(KINDS):
        raise HelplinesError(
            f"{at}: unknown placeholders {sorted(fields - set(KINDS))}; known: {list(KINDS)}"
        )
    return text


def _line(raw: object, at: str) -> Line:
    if not isinstance(raw, dict):
        raise HelplinesError(f"{at}: a line is a table ({{ number = ..., source = ... }})")
    _only(raw, _LINE_KEYS, at)
    number = raw.get("number")
    numbers = tuple(number) if isinstance(number, list) else (number,)
    if not numbers or not all(isinstance(n, str) and _NUMBER.fullmatch(n) for n in numbers):
        raise HelplinesError(f"{at}.number: {number!r} is not a phone number (or a list of them)")
    flags = {k: raw.get(k, False) for k in ("free", "day_and_night", "sms")}
    for k, v in flags.items():
        if not isinstance(v, bool):
            raise HelplinesError(f"{at}.{k}: must be true or false")
    verified = raw.get("verified")
    if verified is not None and (not isinstance(verified, date) or hasattr(verified, "hour")):
        raise HelplinesError(f"{at}.verified: must be a date, e.g. 2025-06-30")
    return Line(
        numbers=numbers,
        name=_per_language(raw["name"], f"{at}.name") if "name" in raw else None,
        note=_per_language(raw["note"], f"{at}.note") if "note" in raw else None,
        source=_text(raw.get("source"), f"{at}.source"),
        verified=verified,
        **flags,
    )


def _locale(tag: str, raw: object) -> Locale:
    at = f"locale.{tag}"
    if not isinstance(raw, dict):
        raise HelplinesError(f"{at}: must be a table")
    _only(raw, {"region", *KINDS}, at)
    found: dict[Kind, tuple[Line, ...]] = {}
    for kind in KINDS:
        items = raw.get(kind)
        if not isinstance(items, list) or not items:
            raise HelplinesError(f"{at}: no {kind} lines (every locale needs every category)")
        found[kind] = tuple(_line(item, f"{at}.{kind}[{i}]") for i, item in enumerate(items))
    return Locale(tag=tag, region=_per_language(raw.get("region"), f"{at}.region"), lines=found)


def _parse(raw: dict[str, Any], source: str) -> HelplineTable:
    try:
        _only(raw, {"default", "sentences", "words", "web", "locale"}, "the file")
        locales = {tag: _locale(tag, v) for tag, v in _table(raw, "locale").items()}
        defaults = _table(raw, "default")
        _only(defaults, LANGUAGES, "default")
        for lang in LANGUAGES:
            if defaults.get(lang) not in locales:
                raise HelplinesError(f"default.{lang}: {defaults.get(lang)!r} is not a locale")
        sentences, words, web = (_table(raw, k) for k in ("sentences", "words", "web"))
        forms: dict[str, dict[str, str]] = {}
        for lang in LANGUAGES:
            given = _table(sentences, lang, "sentences")
            _only(given, _SENTENCES, f"sentences.{lang}")
            for kind in _SENTENCES:
                at, value = f"sentences.{lang}.{kind}", given.get(kind)
                if isinstance(value, dict):  # du and Sie forms
                    _only(value, ("du", "sie"), at)
                    forms.setdefault(kind, {}).update(
                        {f"{lang}.{r}": _template(value.get(r), f"{at}.{r}") for r in ("du", "sie")}
                    )
                else:
                    text = _template(value, at)
                    forms.setdefault(kind, {}).update({f"{lang}.du": text, f"{lang}.sie": text})
            for name, keys in (("words", _WORDS), ("web", _WEB)):
                section = _table(words if name == "words" else web, lang, name)
                _only(section, keys, f"{name}.{lang}")
                for key in keys:
                    _text(section.get(key), f"{name}.{lang}.{key}")
    except HelplinesError as exc:
        raise HelplinesError(f"help lines {source}: {exc}") from None
    return HelplineTable(
        source=source,
        locales=locales,
        defaults={lang: defaults[lang] for lang in LANGUAGES},
        # English has one register: its du and Sie forms are the same sentence.
        sentences={k: Phrase(f["en.sie"], f["de.du"], f["de.sie"]) for k, f in forms.items()},
        words={lang: dict(words[lang]) for lang in LANGUAGES},
        web={lang: dict(web[lang]) for lang in LANGUAGES},
    )


# The shipped table with each user's language default: what a reply shows when no
# service configured otherwise (tests, the eval, the benchmark).
SHIPPED = Helplines(shipped_table())

__all__ = [
    "KINDS",
    "SHIPPED",
    "SHOWN",
    "HelplineTable",
    "Helplines",
    "HelplinesError",
    "Line",
    "Locale",
    "load",
    "shipped_table",
]
