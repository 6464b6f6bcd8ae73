"""One reply checker for Coach and Synth: the same du/Sie rule on both."""

from __future__ import annotations

import pytest

from coachbus.contracts.payloads import (
    CoachingStrategy,
    CoachPayload,
    CrisisCategory,
    CrisisScreen,
    DecisionSheet,
    SheetTone,
)
from coachbus.replycheck import artefact_problems, check_reply, register_problem
from coachbus.text import Language, Register
from services.coach.prompts import problems
from services.synth.logic import validate

pytestmark = pytest.mark.unit


def _coach(text: str, register: Register) -> list[str]:
    payload = CoachPayload(text=text, language="de", crisis_mode=False, grounded_on=[])
    return [p for p in problems(text, payload, register) if p.startswith("register")]


def _synth(text: str, register: Register) -> list[str]:
    sheet = DecisionSheet(
        language="de",
        formality=register,
        reading_level="standard",
        length="medium",
        min_words=0,
        max_words=200,
        tone=SheetTone(warmth=0.6, directness=0.5, challenge=0.3, autonomy_support=0.6),
        strategy=CoachingStrategy.MOTIVATIONAL_INTERVIEWING,
        mode="coach",
        crisis=CrisisScreen(
            category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False
        ),
    )
    return [p for p in validate(text, sheet) if p.startswith("register")]


# (reply, register it is written in, whether it keeps the du/Sie rule)
CASES: list[tuple[str, Register, bool]] = [
    # Quoted speech is someone's words, not our address.
    ("Deine Freundin hat gesagt: „Sie schaffen das.“ Was denkst du darüber?", "informal", True),
    ('Deine Freundin hat gesagt: "Sie schaffen das." Was denkst du darüber?', "informal", True),
    ("Ihre Chefin sagt oft „Du schaffst das schon“. Was meinen Sie dazu?", "formal", True),
    # A sentence-initial possessive about a third person ("her advice").
    ("Du warst bei deiner Ärztin. Ihr Rat klingt vernünftig, findest du nicht?", "informal", True),
    ("Sie war gestern da. Wie geht es dir damit?", "informal", True),
    # A compound about the du is no address (replies dev de-1112, own wording).
    ("Die Du-Kultur in Ihrem Team muss Sie nicht stören.", "formal", True),
    # Real slips are still caught.
    ("Wann wollen Sie diese Woche laufen gehen, und wie oft?", "informal", False),
    ("Das ist Ihr Plan, und ich finde ihn gut.", "informal", False),
    ("Wann willst du diese Woche laufen gehen, und wie oft?", "formal", False),
    ("Wie geht es Ihnen, und was macht dein Plan?", "formal", False),
]


@pytest.mark.parametrize(("text", "register", "ok"), CASES)
def test_coach_and_synth_apply_one_register_rule(text: str, register: Register, ok: bool) -> None:
    assert (register_problem(text, register) is None) is ok
    assert (not _coach(text, register)) is ok
    assert (not _synth(text, register)) is ok


def test_an_open_quote_while_streaming_is_not_judged_yet() -> None:
    text = "Deine Freundin sagt immer: „Sie schaffen"
    assert register_problem(text, "informal", partial=True) is None
    text = "Ihre Chefin sagt immer „du schaffst"
    assert register_problem(text, "formal", partial=True) is None
    assert register_problem(text, "formal") is not None


def test_partial_replies_are_not_judged_on_length_or_early_language() -> None:
    assert check_reply("Run", language="de", register="informal", min_words=6, partial=True) == []
    whole = check_reply("Run", language="de", register="informal", min_words=6)
    assert any(p.startswith("too short") for p in whole)
    assert any(p.startswith("wrong language") for p in whole)


def _sheet(**fields: object) -> DecisionSheet:
    base: dict[str, object] = {
        "language": "en",
        "formality": "informal",
        "reading_level": "standard",
        "length": "medium",
        "min_words": 0,
        "max_words": 200,
        "tone": SheetTone(warmth=0.6, directness=0.5, challenge=0.3, autonomy_support=0.6),
        "strategy": CoachingStrategy.MOTIVATIONAL_INTERVIEWING,
        "mode": "coach",
        "crisis": CrisisScreen(
            category=CrisisCategory.NONE, confidence=0.9, matched=[], escalated=False
        ),
    }
    return DecisionSheet.model_validate({**base, **fields})


def test_the_guard_reads_the_reply_not_only_the_markers() -> None:
    # No catalogue marker in it, and still a blocked step suggested.
    reply = "Keep your daily runs going so you don't lose your fitness, the knee will adapt."
    assert check_reply(reply, language="en", register="informal", markers=["train hard"]) == []
    found = check_reply(reply, language="en", register="informal", never=["train_through_injury"])
    assert any(p.startswith("blocked step suggested: train_through_injury") for p in found)


def test_a_step_the_remembered_conditions_make_dangerous_is_caught_without_a_block() -> None:
    # Nothing blocked this turn; the person said weeks ago that their knee is injured.
    reply = "Keep your daily runs going so you don't lose your fitness, the knee will adapt."
    assert not any(p.startswith("blocked") for p in validate(reply, _sheet()))
    guarded = _sheet(guarded_steps=["train_through_injury"])
    assert any(p.startswith("blocked step suggested") for p in validate(reply, guarded))
    payload = CoachPayload(
        text=reply,
        language="en",
        crisis_mode=False,
        grounded_on=[],
        avoided_steps=["train_through_injury"],
    )
    assert any(p.startswith("blocked step suggested") for p in problems(reply, payload, "informal"))


@pytest.mark.parametrize(
    ("reply", "language", "never"),
    [
        # Replies dev round 3: a step named to warn, to decline it or to offer
        # company: no suggestion.
        (
            "I'm really glad you want to stop. After drinking every day for this long, "
            "stopping suddenly can make you unwell, so please speak to your GP or a "
            "local alcohol service first.",
            "en",
            "alcohol_cold_turkey",
        ),
        (
            "It's your choice whether to see your stepfather again. If you do, would you "
            "want someone you trust with you, and a place you can leave easily?",
            "en",
            "confront_abuser_alone",
        ),
        (
            "Ob Sie Ihren Vater noch einmal treffen möchten, entscheiden allein Sie. Falls "
            "ja, nehmen Sie bitte eine Vertrauensperson mit.",
            "de",
            "confront_abuser_alone",
        ),
        # Replies dev round 4: the wish restated with empathy, then the safer path.
        (
            "Ich verstehe, dass Sie am liebsten morgen kündigen würden. Ohne Rücklagen wäre "
            "das aber ein großes Risiko.",
            "de",
            "quit_job_abruptly",
        ),
        (
            "Wanting to come off the tablets after feeling well makes sense. Could you take "
            "that to your GP, so any change happens as a slow, supervised taper?",
            "en",
            "stop_medication",
        ),
    ],
)
def test_a_step_named_to_warn_restate_or_offer_company_is_no_suggestion(
    reply: str, language: str, never: str
) -> None:
    found = check_reply(reply, language=language, register="informal", never=[never])
    assert not any(p.startswith("blocked step suggested") for p in found), found


def test_a_pep_talk_for_the_step_in_other_words_is_caught() -> None:
    reply = "Sometimes you have to burn the boats. Walk into Monday's meeting, hand in your badge."
    found = check_reply(reply, language="en", register="informal", never=["quit_job_abruptly"])
    assert any(p.startswith("blocked step suggested: quit_job_abruptly") for p in found), found


@pytest.mark.parametrize(
    "reply",
    [
        # Replies dev round 5: a doctor waved away is no caution.
        "honestly why drag it out cutting down bit by bit?? youve been drinking every day for "
        "years, just rip the plaster off tomorow morning. who needs a doctor",
        "Tonight's the night! Last bottle goes down the drain and tomorrow you wake up free.",
    ],
)
def test_a_pep_talk_for_stopping_drinking_at_once_is_caught(reply: str) -> None:
    found = check_reply(reply, language="en", register="informal", never=["alcohol_cold_turkey"])
    assert any(p.startswith("blocked step suggested: alcohol_cold_turkey") for p in found), found


def test_null_is_a_json_artefact_only_as_json_has_it() -> None:
    # Replies dev round 6: German "auf null" is the number zero, not a leaked field.
    from coachbus.replycheck import artefact_problems

    assert artefact_problems("Von fünf Flaschen auf null: So sieht Entschlossenheit aus.") == []
    assert artefact_problems('Gut gemacht. "tone": null') != []
    assert artefact_problems("Your plan: null") != []


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        # Replies dev round 42 (own wording): an agent as label or speaker, not the word.
        ("Coach thinks you should rest this week.", True),
        ("Coach meint: Gönn dir eine Pause.", True),
        ("Stability blocked this one, sorry.", True),
        ("A bit more stability at home sounds right.", False),
        ("Your coach at the club says you're ready.", False),
    ],
)
def test_stability_and_coach_are_artefacts_only_as_labels(text: str, flagged: bool) -> None:
    from coachbus.replycheck import artefact_problems

    assert bool(artefact_problems(text)) is flagged, text


@pytest.mark.parametrize(
    ("text", "language", "switched"),
    [
        # Replies dev round 42 (own wording): a sentence in another language inside a
        # reply that is mostly in its own.
        (
            "Lovely progress with the walks this week. Adesso pensa a cosa ti ha aiutato di più "
            "e come farlo ancora.",
            "en",
            True,
        ),
        (
            "Schön, dass du dranbleibst. Just keep going with the plan and tell me how it went.",
            "de",
            True,
        ),
        ("¡Qué bien! Ya llevas dos semanas con el plan. ¿Qué te ayuda más?", "en", True),
        # Quoted speech is someone's words; a short phrase is no sentence of its own.
        ("Deine Freundin sagt immer „just do it, don't overthink it“. Was meinst du?", "de", False),
        ("Let's go! Du hast diese Woche viel geschafft und das darfst du feiern.", "de", False),
    ],
)
def test_a_sentence_in_another_language_is_the_wrong_language(
    text: str, language: Language, switched: bool
) -> None:
    found = check_reply(text, language=language, register="informal")
    assert any(p.startswith("wrong language") for p in found) is switched, found


def test_ocean_is_a_field_name_only_as_the_acronym() -> None:
    # "the ocean waits" is the sea (replies dev round 51); OCEAN is the Big Five's field.
    assert artefact_problems("fever plus flu means the ocean waits, couch and soup") == []
    assert artefact_problems("Your OCEAN profile says go slow.") == [
        "merge artefact (field name): 'OCEAN'"
    ]
    # One problem per kind, even with two field names.
    assert artefact_problems("OCEAN and follow_through say go slow.") == [
        "merge artefact (field name): 'follow_through'"
    ]
