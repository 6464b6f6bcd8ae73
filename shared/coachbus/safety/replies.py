"""The replies of the safety layer: the crisis reply, the check-in, what follows a no.

Coach sends them at once and Synth sends the same text (never rewritten by a model),
so both build them here. The sentences are data (``content/crisis/replies.toml``,
read and checked once at import); the help lines come from the :class:`Helplines`
the service configured, so every reply carries its locale's numbers.
"""

from __future__ import annotations

from coachbus import content
from coachbus.contracts.payloads import CheckInQuestion, CrisisCategory
from coachbus.safety.helplines import Helplines
from coachbus.text import Language, Phrase, Register

# The slot a check-in's sentence names for the locale's crisis-line sentence.
_LIFELINE = frozenset({"lifeline"})
_CRISES = tuple(c for c in CrisisCategory if c is not CrisisCategory.NONE)
# The check-in asked again after no clear answer, by the question that was open
# (ours, or "are you safe right now?" after a crisis reply).
_ASKED_AGAIN: dict[CheckInQuestion | None, str] = {
    None: "check_in",
    "suicide": "check_in_again",
    "safety": "safety_again",
}


def _reply(doc: content.Doc, value: object, at: str, allowed: frozenset[str]) -> Phrase:
    """One reply: en, and de (when du and Sie read the same) or du and sie."""
    raw = content.table(doc, value, at)
    if "de" in raw:
        content.only(doc, raw, ("en", "de"), at)
        en, de = (content.template(doc, raw.get(k), f"{at}.{k}", allowed) for k in ("en", "de"))
        return Phrase(en, de, de)
    content.only(doc, raw, ("en", "du", "sie"), at)
    en, du, sie = (
        content.template(doc, raw.get(k), f"{at}.{k}", allowed) for k in ("en", "du", "sie")
    )
    return Phrase(en, du, sie)


def _replies() -> tuple[dict[str, dict[CrisisCategory, Phrase]], dict[str, Phrase]]:
    doc = content.read("coachbus.content", "crisis/replies.toml")
    content.only(doc, doc.raw, ("crisis", *_ASKED_AGAIN.values(), "after_denial"), "")
    crisis = content.table(doc, doc.raw.get("crisis"), "crisis")
    content.only(doc, crisis, ("open", "close", "ask_directly"), "crisis")
    framing: dict[str, dict[CrisisCategory, Phrase]] = {}
    for part in ("open", "close"):
        at = f"crisis.{part}"
        table = content.table(doc, crisis.get(part), at)
        content.only(doc, table, [c.value for c in _CRISES], at)
        framing[part] = {
            c: _reply(doc, table.get(c.value), f"{at}.{c.value}", frozenset()) for c in _CRISES
        }
    others = {
        name: _reply(doc, doc.raw.get(name), name, _LIFELINE)
        for name in (*_ASKED_AGAIN.values(), "after_denial")
    }
    others["ask_directly"] = _reply(
        doc, crisis.get("ask_directly"), "crisis.ask_directly", frozenset()
    )
    return framing, others


_CRISIS_FRAMING, _CHECK_INS = _replies()


def crisis_reply(
    category: CrisisCategory,
    language: Language,
    register: Register,
    helplines: Helplines,
    *,
    asks: CheckInQuestion | None = None,
) -> str:
    """The safe reply for a crisis: acknowledgement, help lines, one question back.

    ``asks`` (the screen's): "suicide" closes with the direct question about suicidal
    thoughts instead of "are you safe right now?" (a warning sign without those words
    is followed by the next rung of the C-SSRS, not by a question it skips to)."""
    if category is CrisisCategory.NONE:
        raise ValueError("crisis_reply needs a crisis category")
    close = (
        _CHECK_INS["ask_directly"]
        if asks == "suicide" and category is CrisisCategory.SUICIDAL_IDEATION
        else _CRISIS_FRAMING["close"][category]
    )
    return " ".join(
        [
            _CRISIS_FRAMING["open"][category].get(language, register),
            *helplines.lines(category, language, register),
            close.get(language, register),
        ]
    )


def check_in_reply(
    language: Language,
    register: Register,
    helplines: Helplines,
    *,
    again: CheckInQuestion | None = None,
) -> str:
    """The reply to an uncertain screen: a direct, calm question and a help line.

    ``again``: the question our last reply asked got no clear answer; it is asked once
    more, gently (our check-in, or "are you safe right now?" after a crisis reply)."""
    line = helplines.lifeline(language, register)
    return _CHECK_INS[_ASKED_AGAIN[again]].get(language, register).format(lifeline=line)


def after_denial_reply(language: Language, register: Register, helplines: Helplines) -> str:
    """The caring turn after a no to our check-in: believed, thanked, door left open."""
    line = helplines.lifeline(language, register)
    return _CHECK_INS["after_denial"].get(language, register).format(lifeline=line)


__all__ = ["after_denial_reply", "check_in_reply", "crisis_reply"]
