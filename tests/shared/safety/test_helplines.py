"""Help lines per locale (coachbus.safety.helplines): the shipped table, the locale
setting, an operator's own file; lookups take the locale, nothing reads the environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coachbus.contracts.payloads import CrisisCategory
from coachbus.safety import helplines
from coachbus.safety.helplines import SHIPPED, Helplines, HelplinesError, shipped_table
from coachbus.safety.replies import crisis_reply
from coachbus.safety.steps import CATALOGUE
from coachbus.settings import CoachbusSettings
from coachbus.text import Language, Register, find_markers
from services.coach.logic import quick_reply
from services.synth.logic import synthesize
from tests.fixtures.agents import msg

pytestmark = pytest.mark.unit

C = CrisisCategory
CRISES = [c for c in C if c is not C.NONE]
TABLE = shipped_table()
LOCALES = sorted(TABLE.locales)
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


DE_MEDICAL = """medical = [
  { number = "112", source = "Notruf 112 (Bundesnetzagentur; European Commission)" },
]"""


def shipped_text() -> str:
    return (Path(helplines.__file__).parents[1] / "content" / "helplines.toml").read_text()


def operator_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "helplines.toml"
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ the shipped table


def test_the_required_locales_and_language_defaults_are_there() -> None:
    assert {"de-DE", "de-AT", "de-CH", "en-US", "en-GB", "en-IE"} <= set(TABLE.locales)
    assert TABLE.locale("de").tag == "de-DE"
    assert TABLE.locale("en").tag == "en"
    # The international English default keeps the lines replies carried before.
    assert TABLE.required_numbers(C.SUICIDAL_IDEATION, "en") == ("112", "911", "988", "116 123")
    assert Helplines(TABLE, None) == SHIPPED


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("category", CRISES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_every_reply_carries_its_locales_numbers(
    locale: str, category: CrisisCategory, language: Language, register: Register
) -> None:
    at = TABLE.locales[locale]
    shown = [line for kind in helplines.SHOWN[category] for line in at.lines[kind]]
    assert shown, "a crisis reply with no help line"
    lines = Helplines(TABLE, locale)
    reply = crisis_reply(category, language, register, lines)
    for line in shown:
        for number in line.numbers:
            assert number in reply, (locale, number)
    assert set(lines.required_numbers(category, language)) == {line.numbers[0] for line in shown}
    every_marker = [m for s in CATALOGUE.values() for m in s.markers]
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
    at = TABLE.locales[locale]
    text = Helplines(TABLE, locale).reminder(language, register)
    assert at.lines["lifeline"][0].numbers[0] in text
    assert at.lines["emergency"][0].numbers[0] in text


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize(("language", "register"), VOICES)
def test_the_lifeline_sentence_offers_someone_to_talk_to_only(
    locale: str, language: Language, register: Register
) -> None:
    at = TABLE.locales[locale]
    lines = Helplines(TABLE, locale)
    text = lines.lifeline(language, register)
    assert all(line.numbers[0] in text for line in at.lines["lifeline"])
    assert text in crisis_reply(C.SUICIDAL_IDEATION, language, register, lines)


def test_claims_are_per_line() -> None:
    # Die Dargebotene Hand charges per call, the men's line keeps office hours: a
    # template never promises what one line does not keep.
    ch = TABLE.lines(C.SUICIDAL_IDEATION, "en", "informal", "de-CH")[1]
    assert "143" in ch and "free" not in ch and "day and night" in ch
    de = TABLE.lines(C.ABUSE, "de", "formal", "de-DE")[1]
    assert "0800 123 99 00 (kostenlos)" in de


def test_every_line_names_its_source_and_all_are_unverified_until_checked() -> None:
    lines = [line for at in TABLE.locales.values() for kind in at.lines.values() for line in kind]
    assert all(line.source.strip() for line in lines)
    assert len(TABLE.unverified()) == len(lines)


# ------------------------------------------------------------------ the locale setting


def configured(settings: CoachbusSettings) -> Helplines:
    """What a service that shows help lines loads as it starts."""
    return Helplines.configured(settings.helplines_file, settings.locale)


def test_locale_de_at_gives_an_english_speaker_austrian_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COACHBUS_LOCALE", "de-AT")
    lines = configured(CoachbusSettings())
    assert lines.locale == "de-AT"
    m = msg(MESSAGES["en"][C.SUICIDAL_IDEATION])
    coach = quick_reply(m, None, None, helplines=lines)
    everyone = ["shadow", "persona", "plasticity", "stability", "coach"]
    final = synthesize(m, {}, everyone, helplines=lines)
    for text in (coach.text, final.text):
        assert "142" in text and "988" not in text
    assert final.language == "en"
    assert final.problems == []


@pytest.mark.parametrize("locale", LOCALES)
def test_synth_accepts_every_locales_crisis_replies(locale: str) -> None:
    lines = Helplines(TABLE, locale)
    for language, messages in MESSAGES.items():
        for category, text in messages.items():
            out = synthesize(msg(text), {}, ["stability"], helplines=lines)
            assert out.crisis_mode, text
            assert out.problems == [], (locale, language, category, out.text)
            for number in lines.required_numbers(category, language):
                assert number in out.text


@pytest.mark.parametrize(("given", "canonical"), [("de_at", "de-AT"), (" EN-gb ", "en-GB")])
def test_locale_spelling_is_forgiven(given: str, canonical: str) -> None:
    assert configured(CoachbusSettings(locale=given)).locale == canonical


def test_an_unknown_locale_stops_start_up_and_lists_the_known_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COACHBUS_LOCALE", "fr-FR")
    with pytest.raises(HelplinesError) as caught:
        configured(CoachbusSettings())
    message = str(caught.value)
    assert "'fr-FR'" in message
    for tag in ("de-AT", "de-CH", "de-DE", "en-GB", "en-IE", "en-US"):
        assert tag in message


def test_the_locale_is_passed_never_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COACHBUS_LOCALE", "de-AT")
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(tmp_path / "missing.toml"))
    # Lookups read only what they are given: the shipped table, each language's default.
    assert "0800 111 0 111" in crisis_reply(C.SUICIDAL_IDEATION, "de", "formal", SHIPPED)
    assert "143" in crisis_reply(C.SUICIDAL_IDEATION, "de", "formal", Helplines(TABLE, "de-CH"))
    with pytest.raises(HelplinesError, match="known"):
        crisis_reply(C.SUICIDAL_IDEATION, "de", "formal", Helplines(TABLE, "xx"))


# ------------------------------------------------------------------ an operator's file


def test_the_file_setting_is_read_from_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = operator_file(tmp_path, shipped_text())
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(path))
    assert CoachbusSettings().helplines_file == path
    monkeypatch.delenv("COACHBUS_HELPLINES_FILE")
    assert CoachbusSettings().helplines_file is None


def test_an_operator_file_overrides_a_number(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    corrected = shipped_text().replace('{ number = "142",', '{ number = "0800 142 142",')
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(operator_file(tmp_path, corrected)))
    lines = Helplines(configured(CoachbusSettings()).table, "de-AT")
    reply = crisis_reply(C.SELF_HARM, "en", "informal", lines)
    assert "0800 142 142" in reply
    assert lines.required_numbers(C.SELF_HARM, "en")[-1] == "0800 142 142"


def test_a_new_country_is_one_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    country = """
[locale.nl-NL]
region = { en = "Netherlands", de = "Niederlande" }
emergency = [{ number = "112", source = "test" }]
lifeline = [{ number = "113", name = "113 Zelfmoordpreventie", free = true, source = "test" }]
abuse = [{ number = "0800 2000", name = "Veilig Thuis", source = "test" }]
medical = [{ number = "112", source = "test" }]
"""
    path = operator_file(tmp_path, shipped_text() + country)
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(path))
    monkeypatch.setenv("COACHBUS_LOCALE", "nl-NL")
    lines = configured(CoachbusSettings())
    assert "nl-NL" in lines.table.known
    en = crisis_reply(C.ABUSE, "en", "informal", lines)
    assert "Veilig Thuis on 0800 2000" in en and "113 Zelfmoordpreventie on 113 (free)" in en
    de = crisis_reply(C.ABUSE, "de", "formal", lines)
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
    with pytest.raises(HelplinesError, match=re.escape(complaint)):
        helplines.load(operator_file(tmp_path, broken))


def test_a_broken_or_missing_file_is_refused_as_it_is_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(tmp_path / "missing.toml"))
    with pytest.raises(HelplinesError, match=r"missing\.toml"):
        configured(CoachbusSettings())
    # Also with no locale set: the file is checked at start-up, not at the first crisis
    # (tests/services/test_help_lines_at_start.py: a service with it does not start).
    bad = shipped_text().replace('number = "142"', 'number = "call us"')
    monkeypatch.setenv("COACHBUS_HELPLINES_FILE", str(operator_file(tmp_path, bad)))
    with pytest.raises(HelplinesError, match="not a phone number"):
        configured(CoachbusSettings())


def test_a_verified_line_is_no_longer_reported(tmp_path: Path) -> None:
    checked = shipped_text().replace(
        '{ number = "142",', '{ number = "142", verified = 2025-06-30,'
    )
    loaded = helplines.load(operator_file(tmp_path, checked))
    assert "de-AT/lifeline/142" not in loaded.unverified()
    assert len(loaded.unverified()) == len(TABLE.unverified()) - 1


# ------------------------------------------------------------------ the web's view


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("language", ["en", "de"])
def test_the_web_view_shows_the_lines_replies_carry(locale: str, language: Language) -> None:
    lines = Helplines(TABLE, locale)
    view = lines.as_json(language)
    assert view["locale"] == locale and view["language"] == language
    assert [g["kind"] for g in view["groups"]] == list(helplines.KINDS)
    replies = " ".join(crisis_reply(c, language, "formal", lines) for c in CRISES) + lines.reminder(
        language, "formal"
    )
    for group in view["groups"]:
        assert group["label"] and group["lines"]
        for line in group["lines"]:
            for number in line["numbers"]:
                assert number in replies
