"""Content shipped as data (crisis rules, help lines per locale, abbreviations, the
sentences replies are built from, domain labels, cue lists, the risky-step catalogue),
read with importlib.resources; operators may point settings at their own copies.

This module is the one reader for the TOML files whose loaders live next to the code
that uses them (coachbus.text, coachbus.safety, coachbus.content.phrases, and each
service's ``content`` folder). It knows TOML and where a value sits in the file, not
what the value means: every error names the file and the key path, e.g.
``content services.synth.content/render.toml: ack.progress[1].sie: must be a
non-empty string``. Files are read once, when the module that needs them is
imported, so a broken file stops a service at start-up, not in a reply.

Data files hold text only: no logic, no code, no conditionals.
"""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any


class ContentError(ValueError):
    """A content file is malformed; the message names the file and the key."""


@dataclass(frozen=True, slots=True)
class Doc:
    """One parsed content file, and where it came from (for error messages)."""

    source: str
    raw: dict[str, Any]

    def fail(self, at: str, problem: str) -> ContentError:
        return ContentError(f"content {self.source}: {at}: {problem}")


def read(package: str, name: str) -> Doc:
    """Parse ``name`` inside ``package`` (e.g. ``coachbus.content``, ``domains.toml``)."""
    source = f"{package}/{name}"
    try:
        text = resources.files(package).joinpath(name).read_text("utf-8")
        return Doc(source, tomllib.loads(text))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ContentError(f"content {source}: {exc}") from exc


def join(at: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key}" if at else key


def table(doc: Doc, value: object, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise doc.fail(at, "missing, or not a table")
    return value


def array(doc: Doc, value: object, at: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise doc.fail(at, "missing, or not a non-empty array")
    return value


def only(doc: Doc, found: Mapping[str, Any], allowed: Iterable[str], at: str) -> None:
    allowed = set(allowed)
    unknown = set(found) - allowed
    if unknown:
        raise doc.fail(
            at or "the file", f"unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}"
        )


def text(doc: Doc, value: object, at: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.fail(at, "must be a non-empty string")
    return value


def texts(doc: Doc, value: object, at: str) -> tuple[str, ...]:
    return tuple(text(doc, v, join(at, i)) for i, v in enumerate(array(doc, value, at)))


def integer(doc: Doc, value: object, at: str, low: int = 0, high: int = 10**6) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise doc.fail(at, f"must be a whole number from {low} to {high}")
    return value


def pattern(doc: Doc, value: object, at: str, flags: int = 0) -> str:
    """A regular expression's source, checked by compiling it once."""
    source = text(doc, value, at)
    try:
        re.compile(source, flags)
    except re.error as exc:
        raise doc.fail(at, f"not a regular expression: {exc}") from exc
    return source


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def template(doc: Doc, value: object, at: str, allowed: Iterable[str]) -> str:
    """A sentence whose ``{placeholders}`` are all in ``allowed``."""
    sentence = text(doc, value, at)
    try:
        found = placeholders(sentence)
    except ValueError as exc:
        raise doc.fail(at, str(exc)) from exc
    unknown = found - set(allowed)
    if unknown:
        known = ", ".join(sorted(allowed)) or "none"
        raise doc.fail(at, f"unknown placeholders {sorted(unknown)}; known here: {known}")
    return sentence
