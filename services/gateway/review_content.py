"""The human tier's words as data: outcomes and answer templates (review.toml).

Read and checked as the gateway starts: a missing label, an unknown key or a
template without its German forms stops it there, naming the file and the key.
Ids are what the bus and the audit carry; labels and sentences are for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from coachbus import content as C
from coachbus.content.phrases import phrase
from coachbus.text import Language, Phrase, Register

FILE = "review.toml"
_ID = "abcdefghijklmnopqrstuvwxyz0123456789_"


@dataclass(frozen=True, slots=True)
class Outcome:
    id: str
    label: dict[Language, str]
    # The person was answered in the chat (the one-step answer closes with it).
    answered: bool


@dataclass(frozen=True, slots=True)
class Template:
    id: str
    label: str
    text: Phrase

    def render(self, language: Language, register: Register | None) -> str:
        # Sie until the person showed du: a stranger writing first is formal.
        return self.text.get(language, register or "formal")


@dataclass(frozen=True, slots=True)
class ReviewContent:
    outcomes: dict[str, Outcome]
    templates: dict[str, Template]
    # What introduces a reviewer's answer where it can only be shown inside the next
    # reply (the OpenAI-compatible endpoint has no channel of its own for it).
    relayed: Phrase

    @property
    def answered_outcome(self) -> str:
        return next(o.id for o in self.outcomes.values() if o.answered)

    def catalogue(self, language: Language, register: Register | None) -> dict[str, Any]:
        """What the console offers: outcomes with labels, templates rendered."""
        return {
            "outcomes": [
                {"id": o.id, "label": o.label["en"], "label_de": o.label["de"]}
                for o in self.outcomes.values()
            ],
            "templates": [
                {"id": t.id, "label": t.label, "text": t.render(language, register)}
                for t in self.templates.values()
            ],
        }


def _id(doc: C.Doc, key: str, at: str) -> str:
    if not key or len(key) > 64 or any(c not in _ID for c in key):
        raise doc.fail(at, "ids are lower-case letters, digits and _ (at most 64)")
    return key


def parse(doc: C.Doc) -> ReviewContent:
    C.only(doc, doc.raw, ("outcomes", "templates", "relayed"), "")
    outcomes: dict[str, Outcome] = {}
    for key, raw in C.table(doc, doc.raw.get("outcomes"), "outcomes").items():
        at = C.join("outcomes", key)
        entry = C.table(doc, raw, at)
        C.only(doc, entry, ("en", "de", "answered"), at)
        answered = entry.get("answered", False)
        if not isinstance(answered, bool):
            raise doc.fail(C.join(at, "answered"), "must be true or false")
        outcomes[_id(doc, key, at)] = Outcome(
            id=key,
            label={lang: C.text(doc, entry.get(lang), C.join(at, lang)) for lang in ("en", "de")},
            answered=answered,
        )
    if not outcomes:
        raise doc.fail("outcomes", "at least one outcome")
    if not any(o.answered for o in outcomes.values()):
        raise doc.fail("outcomes", "one outcome must be `answered = true`")
    templates: dict[str, Template] = {}
    for key, raw in C.table(doc, doc.raw.get("templates"), "templates").items():
        at = C.join("templates", key)
        entry = dict(C.table(doc, raw, at))
        label = C.text(doc, entry.pop("label", None), C.join(at, "label"))
        templates[_id(doc, key, at)] = Template(id=key, label=label, text=phrase(doc, entry, at))
    relayed = phrase(doc, dict(C.table(doc, doc.raw.get("relayed"), "relayed")), "relayed")
    return ReviewContent(outcomes=outcomes, templates=templates, relayed=relayed)


@cache
def shipped() -> ReviewContent:
    """The shipped file, read once per process."""
    return parse(C.read("coachbus.content", FILE))
