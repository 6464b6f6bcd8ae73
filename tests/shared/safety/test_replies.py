"""The safety layer's replies (coachbus.safety.replies): built from their data file and
the configured help lines; a broken file names the place of the mistake."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from coachbus import content
from coachbus.contracts.payloads import CrisisCategory
from coachbus.safety import replies
from coachbus.safety.helplines import SHIPPED, Helplines, shipped_table
from coachbus.safety.steps import CATALOGUE
from coachbus.text import Language, Register, find_markers

pytestmark = pytest.mark.unit

C = CrisisCategory
CRISES = [c for c in C if c is not C.NONE]
VOICES: list[tuple[Language, Register]] = [("en", "informal"), ("de", "informal"), ("de", "formal")]


@pytest.mark.parametrize("category", CRISES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_crisis_reply_has_required_help_lines(
    category: CrisisCategory, language: Language, register: Register
) -> None:
    reply = replies.crisis_reply(category, language, register, SHIPPED)
    for number in SHIPPED.required_numbers(category, language):
        assert number in reply
    if language == "de" and register == "formal":
        assert " du " not in reply
        assert " dich " not in reply
    if language == "de" and register == "informal":
        assert " Sie " not in reply


def test_crisis_replies_contain_no_blocked_marker() -> None:
    every_marker = [m for s in CATALOGUE.values() for m in s.markers]
    for category in CRISES:
        for lang, reg in VOICES:
            reply = replies.crisis_reply(category, lang, reg, SHIPPED)
            assert find_markers(reply, every_marker) == []


def test_a_crisis_reply_needs_a_crisis() -> None:
    with pytest.raises(ValueError, match="crisis category"):
        replies.crisis_reply(C.NONE, "en", "informal", SHIPPED)


@pytest.mark.parametrize(("language", "register"), VOICES)
def test_check_ins_carry_the_configured_locales_lifeline(
    language: Language, register: Register
) -> None:
    swiss = Helplines(shipped_table(), "de-CH")
    line = swiss.lifeline(language, register)
    assert "143" in line
    for again in (None, "suicide", "safety"):
        text = replies.check_in_reply(language, register, swiss, again=again)
        assert text.endswith(line)
    assert replies.after_denial_reply(language, register, swiss).endswith(line)


def _replies_with(monkeypatch: pytest.MonkeyPatch, edit: Callable[[dict[str, Any]], None]) -> None:
    read = content.read

    def patched(package: str, name: str) -> content.Doc:
        doc = read(package, name)
        if name != "crisis/replies.toml":
            return doc
        raw = copy.deepcopy(doc.raw)
        edit(raw)
        return content.Doc(doc.source, raw)

    monkeypatch.setattr(content, "read", patched)
    replies._replies()


def test_a_missing_crisis_sentence_names_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(content.ContentError, match=r"replies.toml: crisis.close.abuse: missing"):
        _replies_with(monkeypatch, lambda raw: raw["crisis"]["close"].pop("abuse"))


def test_an_unknown_placeholder_names_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    def edit(raw: dict[str, Any]) -> None:
        raw["after_denial"]["sie"] += " {hotline}"

    with pytest.raises(content.ContentError, match=r"after_denial.sie: unknown placeholders"):
        _replies_with(monkeypatch, edit)


@pytest.mark.parametrize(("language", "register"), VOICES)
def test_a_crisis_reply_can_ask_the_direct_question(language: Language, register: Register) -> None:
    # After a burden or hopelessness message the reply asks about suicidal thoughts,
    # not "are you safe right now?" (the C-SSRS ladder), with the same help lines.
    asking = replies.crisis_reply(C.SUICIDAL_IDEATION, language, register, SHIPPED, asks="suicide")
    default = replies.crisis_reply(C.SUICIDAL_IDEATION, language, register, SHIPPED)
    for number in SHIPPED.required_numbers(C.SUICIDAL_IDEATION, language):
        assert number in asking
    direct = {"en": "thoughts of ending your life", "de": "das Leben zu nehmen"}[language]
    assert direct in asking and direct not in default
    assert ("safe right now" in default) if language == "en" else ("gerade sicher" in default)
    assert "safe right now" not in asking and "gerade sicher" not in asking
    # Only suicidal ideation has that rung: another crisis keeps its own question.
    assert replies.crisis_reply(C.SELF_HARM, language, register, SHIPPED, asks="suicide") == (
        replies.crisis_reply(C.SELF_HARM, language, register, SHIPPED)
    )
