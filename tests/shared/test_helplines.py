"""Help lines per locale: the shipped table, the locale setting, an operator's own file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from coachbus import helplines, safety
from coachbus.contracts.payloads import CrisisCategory
from coachbus.settings import CoachbusSettings, get_settings
from coachbus.text import Language, Register, find_markers
from services.coach.logic import quick_reply
from services.synth.logic import synthesize
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

C = CrisisCategory
CRISES = [c for c in C if c is not C.NONE]
SHIPPED = helplines.table()
LOCALES = sorted(SHIPPED.locales)
VOICES: list[tuple[Language, Register]] = [("en", "informal"), ("de", "informal"), ("de", "formal")]
MESSAGES: dict[Language, dict[CrisisCategory, str]] = {
    "en": {
        C.SUICIDAL_IDEATION: "I don't want to live anymore.",
        C.SELF_HARM: "I cut myself again last night.",
        C.ABUSE: "My husband hits me when he drinks.",
        C.MEDICAL_EMERGENCY: "I have chest pain and can't breathe.",
    },
    "de": {
        C.SUICIDAL_IDEATION: "Ich will nicht mehr leben.",
        C.SELF_HARM: "Ich ritze mich wieder.",
        C.ABUSE: "Mein Mann schlägt mich.",
        C.MEDICAL_EMERGENCY: "Ich habe zu viele Tabletten genommen.",
    },
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Settings and help lines read again from this test's environment (and after it)."""
    get_settings.cache_clear()
    helplines.table.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()
    helplines.table.cache_clear()


DE_MEDICAL = """medical = [
  { number = "112", source = "Notruf 112 (Bundesnetzagentur; European Commission)" },
]"""


def shipped_text() -> str:
    return (Path(helplines.__file__).parent / "content" / "helplines.toml").read_text()


def operator_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "helplines.toml"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ the shipped table


def test_the_required_locales_and_language_defaults_are_there() -> None:
    assert {"de-DE", "de-AT", "de-CH", "en-US", "en-GB", "en-IE"} <= set(SHIPPED.locales)
    assert SHIPPED.locale("de").tag == "de-DE"
    assert SHIPPED.locale("en").tag == "en"
    # The international English default keeps the lines replies carried before.
    assert SHIPPED.required_numbers(C.SUICIDAL_IDEATION, "en") == ("112", "911", "988", "116 123")


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("category", CRISES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_every_reply_carries_its_locales_numbers(
    locale: str, category: CrisisCategory, language: Language, register: Register
) -> None:
    at = SHIPPED.locales[locale]
    shown = [line for kind in helplines.SHOWN[category] for line in at.lines[kind]]
    assert shown, "a crisis reply with no help line"
    reply = safety.crisis_reply(category, language, register, locale)
    for line in shown:
        for number in line.numbers:
            assert number in reply, (locale, number)
    assert set(safety.required_numbers(category, language, locale)) == {
        line.numbers[0] for line in shown
    }
    every_marker = [m for s in safety.CATALOGUE.values() for m in s.markers]
    assert find_markers(reply, every_marker) == []
    if language == "de" and register == "formal":
        assert not re.search(r"\b(?:du|dich|dir|dein\w*)\b", reply, re.I)
    if language == "de" and register == "informal":
        assert not re.search(r"(?<![.!?:] )\b(?:Sie|Ihnen|Ihr\w*)\b", reply[1:])


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_the_reminder_names_the_lifeline_and_the_emergency_number(
    locale: str, language: Language, register: Register
) -> None:
    at = SHIPPED.locales[locale]
    text = safety.resource_reminder(language, register, locale)
    assert at.lines["lifeline"][0].numbers[0] in text
    assert at.lines["emergency"][0].numbers[0] in text


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_the_lifeline_sentence_offers_someone_to_talk_to_only(
    locale: str, language: Language, register: Register
) -> None:
    at = SHIPPED.locales[locale]
    text = helplines.lifeline(language, register, locale)
    assert all(line.numbers[0] in text for line in at.lines["lifeline"])
    assert text in safety.crisis_reply(C.SUICIDAL_IDEATION, language, register, locale)


def test_claims_are_per_line() -> None:
    # Die Dargebotene Hand charges per call, the men's line keeps office hours: a
    # template never promises what one line does not keep.
    ch = SHIPPED.lines(C.SUICIDAL_IDEATION, "en", "informal", "de-CH")[1]
    assert "143" in ch and "free" not in ch and "day and night" in ch
    de = SHIPPED.lines(C.ABUSE, "de", "formal", "de-DE")[1]
    assert "0800 123 99 00 (kostenlos)" in de


def test_every_line_names_its_source_and_all_are_unverified_until_checked() -> None:
    lines = [line for at in SHIPPED.locales.values() for kind in at.lines.values() for line in kind]
    assert all(line.source.strip() for line in lines)
    assert len(SHIPPED.unverified()) == len(lines)


# ------------------------------------------------------------------ the locale setting


def test_locale_de_at_gives_an_english_speaker_austrian_numbers(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("COACHBUS_LOCALE", "de-AT")
    assert get_settings().locale == "de-AT"
    m = msg(MESSAGES["en"][C.SUICIDAL_IDEATION])
    coach = quick_reply(m, None, None)
    final = synthesize(m, {}, ["shadow", "persona", "plasticity", "stability", "coach"])
    for text in (coach.text, final.text):
        assert "142" in text and "988" not in text
    assert final.language == "en"
    assert final.problems == []


@pytest.mark.parametrize("locale", LOCALES)
def test_synth_accepts_every_locales_crisis_replies(env: pytest.MonkeyPatch, locale: str) -> None:
    env.setenv("COACHBUS_LOCALE", locale)
    for language, messages in MESSAGES.items():
        for category, text in messages.items():
            out = synthesize(msg(text), {}, ["stability"])
            assert out.crisis_mode, text
            assert out.problems == [], (locale, language, category, out.text)
            for number in safety.required_numbers(category, language):
                assert number in out.text


@pytest.mark.parametrize(("given", "canonical"), [("de_at", "de-AT"), (" EN-gb ", "en-GB")])
def test_locale_spelling_is_forgiven(given: str, canonical: str) -> None:
    assert CoachbusSettings(locale=given).locale == canonical


def test_an_unknown_locale_stops_start_up_and_lists_the_known_ones(
    env: pytest.MonkeyPatch,
) -> None:
    env.setenv("COACHBUS_LOCALE", "fr-FR")
    with pytest.raises(ValidationError) as caught:
        CoachbusSettings()
    message = str(caught.value)
    assert "'fr-FR'" in message
    for tag in ("de-AT", "de-CH", "de-DE", "en-GB", "en-IE", "en-US"):
        assert tag in message


def test_a_test_can_pass_a_locale_without_the_environment() -> None:
    assert "143" in safety.crisis_reply(C.SUICIDAL_IDEATION, "de", "formal", locale="de-CH")
    with pytest.raises(helplines.HelplinesError, match="known"):
        safety.crisis_reply(C.SUICIDAL_IDEATION, "de", "formal", locale="xx")


# ------------------------------------------------------------------ an operator's file


def test_an_operator_file_overrides_a_number(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    corrected = shipped_text().replace('{ number = "142",', '{ number = "0800 142 142",')
    env.setenv("COACHBUS_HELPLINES_FILE", str(operator_file(tmp_path, corrected)))
    reply = safety.crisis_reply(C.SELF_HARM, "en", "informal", locale="de-AT")
    assert "0800 142 142" in reply
    assert safety.required_numbers(C.SELF_HARM, "en", "de-AT")[-1] == "0800 142 142"


def test_a_new_country_is_one_table(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    country = """
[locale.nl-NL]
region = { en = "Netherlands", de = "Niederlande" }
emergency = [{ number = "112", source = "test" }]
lifeline = [{ number = "113", name = "113 Zelfmoordpreventie", free = true, source = "test" }]
abuse = [{ number = "0800 2000", name = "Veilig Thuis", source = "test" }]
medical = [{ number = "112", source = "test" }]
"""
    path = operator_file(tmp_path, shipped_text() + country)
    env.setenv("COACHBUS_HELPLINES_FILE", str(path))
    env.setenv("COACHBUS_LOCALE", "nl-NL")
    assert "nl-NL" in helplines.table().known
    en = safety.crisis_reply(C.ABUSE, "en", "informal")
    assert "Veilig Thuis on 0800 2000" in en and "113 Zelfmoordpreventie on 113 (free)" in en
    de = safety.crisis_reply(C.ABUSE, "de", "formal")
    assert "Veilig Thuis unter 0800 2000" in de and "Sie" in de


@pytest.mark.parametrize(
    ("edit", "complaint"),
    [
        (lambda t: t.replace(DE_MEDICAL, ""), "locale.de-DE: no medical lines"),
        (lambda t: t.replace("{lifeline};", "{lifelines};"), "unknown placeholders"),
        (lambda t: t.replace('number = "142"', 'number = "TODO"'), "not a phone number"),
        (lambda t: t.replace("Telefonseelsorge Österreich (telefonseelsorge.at)", ""), "source"),
        (lambda t: t.replace("free = true", "free = 1", 1), "true or false"),
        (lambda t: t.replace('"Samaritans"', '"Samaritans [UK]"', 1), "may not carry"),
        (lambda t: t.replace('de = "de-DE"', 'de = "de-LU"'), "default.de"),
        (lambda t: t.replace("[words.de]", "[words.de]\nand = 'und'"), "unknown keys"),
        (lambda t: t + "[", "help lines"),
    ],
)  # fmt: skip
def test_a_broken_file_is_refused_with_the_place_of_the_mistake(
    tmp_path: Path, edit: object, complaint: str
) -> None:
    broken = edit(shipped_text())  # type: ignore[operator]
    assert broken != shipped_text()
    with pytest.raises(helplines.HelplinesError, match=re.escape(complaint)):
        helplines.load(operator_file(tmp_path, broken))


def test_a_broken_or_missing_file_stops_start_up(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("COACHBUS_HELPLINES_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(ValidationError, match=r"missing\.toml"):
        CoachbusSettings()
    # Also with no locale set: the file is checked at start-up, not at the first crisis.
    bad = shipped_text().replace('number = "142"', 'number = "call us"')
    env.setenv("COACHBUS_HELPLINES_FILE", str(operator_file(tmp_path, bad)))
    with pytest.raises(ValidationError, match="not a phone number"):
        CoachbusSettings()


def test_a_verified_line_is_no_longer_reported(tmp_path: Path) -> None:
    checked = shipped_text().replace(
        '{ number = "142",', '{ number = "142", verified = 2025-06-30,'
    )
    loaded = helplines.load(operator_file(tmp_path, checked))
    assert "de-AT/lifeline/142" not in loaded.unverified()
    assert len(loaded.unverified()) == len(SHIPPED.unverified()) - 1


# ------------------------------------------------------------------ the web's view


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("language", ["en", "de"])
def test_the_web_view_shows_the_lines_replies_carry(locale: str, language: Language) -> None:
    view = SHIPPED.as_json(language, locale)
    assert view["locale"] == locale and view["language"] == language
    assert [g["kind"] for g in view["groups"]] == list(helplines.KINDS)
    replies = " ".join(
        safety.crisis_reply(c, language, "formal", locale) for c in CRISES
    ) + safety.resource_reminder(language, "formal", locale)
    for group in view["groups"]:
        assert group["label"] and group["lines"]
        for line in group["lines"]:
            for number in line["numbers"]:
                assert number in replies
