"""Sentences as data: a Phrase from a TOML table, checked as it loads.

In a file, a sentence is a table with its English form and either one German form
(``de = ...``, when du and Sie read the same) or both (``du = ...`` and ``sie = ...``):

    [[open.progress]]
    en = "Good to hear the {en} is moving."
    de = "Schön, dass sich {de_bei} etwas bewegt."

Writing identical du and Sie forms twice is an error, so a difference between them is
always deliberate. The code that loads a group of sentences says which placeholders
its renderer fills there (a subset of coachbus.text.PLACEHOLDERS); any other is an
error at load time, naming the file and the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from coachbus import content as C
from coachbus.text import DOMAIN_PLACEHOLDERS, PLACEHOLDERS, Phrase

# The label's forms: {en}, {de_nom} … {De_mit}.
DOMAIN = DOMAIN_PLACEHOLDERS
NONE: frozenset[str] = frozenset()

_T = TypeVar("_T")


def phrase(doc: C.Doc, value: object, at: str, allowed: Iterable[str] = NONE) -> Phrase:
    """One sentence in en and de (or du and sie), with only ``allowed`` placeholders."""
    allowed = frozenset(allowed)
    if not allowed <= PLACEHOLDERS:
        raise ValueError(f"not in the placeholder vocabulary: {sorted(allowed - PLACEHOLDERS)}")
    raw = C.table(doc, value, at)
    if "de" in raw:
        C.only(doc, raw, ("en", "de"), at)
        en, de = (C.template(doc, raw.get(k), C.join(at, k), allowed) for k in ("en", "de"))
        return Phrase(en, de, de)
    if "du" not in raw and "sie" not in raw:
        raise doc.fail(at, "needs en, and de (or du and sie)")
    C.only(doc, raw, ("en", "du", "sie"), at)
    en, du, sie = (C.template(doc, raw.get(k), C.join(at, k), allowed) for k in ("en", "du", "sie"))
    if du == sie:
        raise doc.fail(at, "the du and Sie forms are the same: write it once, as de = ...")
    return Phrase(en, du, sie)


def variants(
    doc: C.Doc, value: object, at: str, allowed: Iterable[str] = NONE
) -> tuple[Phrase, ...]:
    """An array of sentences a renderer picks one of (``[[group]]`` tables)."""
    items = C.array(doc, value, at)
    return tuple(phrase(doc, item, C.join(at, i), allowed) for i, item in enumerate(items))


def keyed(
    doc: C.Doc,
    value: object,
    at: str,
    keys: Iterable[str],
    make: Callable[[C.Doc, object, str], _T],
    *,
    every: bool = True,
) -> dict[str, _T]:
    """A table of ``keys`` (every one of them, unless ``every`` is False) to ``make``'s
    values, in the order of ``keys``."""
    keys = tuple(keys)
    raw = C.table(doc, value, at)
    C.only(doc, raw, keys, at)
    if every and (missing := [k for k in keys if k not in raw]):
        raise doc.fail(at, f"missing {missing}")
    return {k: make(doc, raw[k], C.join(at, k)) for k in keys if k in raw}
