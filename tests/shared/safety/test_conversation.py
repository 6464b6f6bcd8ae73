"""Risk read across the conversation (coachbus.safety.conversation): the question our
reply asked is state, an answer to it is read first, and warning signs add up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from coachbus.contracts.payloads import CrisisCategory
from coachbus.contracts.state import SafetyState
from coachbus.safety.conversation import (
    LEARNED_ASK,
    classify_answer,
    conversation_book,
    fold_turn,
    left_to_learned,
    open_question,
    read_turn,
    signs_in,
)
from coachbus.safety.model import RiskScreenCall, check_claim, context_for_model
from coachbus.safety.screen import is_crisis, needs_check_in, review_severity

pytestmark = pytest.mark.unit

T0 = datetime(2026, 3, 2, 20, 0, tzinfo=UTC)


class Chat:
    """One user's messages through the code Stability runs on its safety state."""

    def __init__(self) -> None:
        self.state: SafetyState | None = None
        self.now = T0
        self.n = 0

    def say(self, text: str, *, after: timedelta = timedelta(minutes=1)) -> object:
        self.now += after
        self.n += 1
        turn_id = f"t{self.n}"
        s = self.state.model_copy(deep=True) if self.state else SafetyState(user_id="u")
        reading = read_turn(self.state, text, turn_id, self.now)
        s.turn_count += 1
        fold_turn(
            s,
            reading,
            reading.screen,
            turn=s.turn_count,
            turn_id=turn_id,
            language="en",
            now=self.now,
        )
        s.mark_applied(turn_id)
        self.state = s
        return reading


@pytest.mark.parametrize(
    "answer",
    [
        "yes",
        "Yes.",
        "yeah",
        "yse",
        "ya",
        "kind of",
        "a bit, yeah",
        "sometimes",
        "maybe",
        "idk maybe",
        "I don't know",
        "not really... well, sometimes",
        "😔",
        "😔 yes",
        "👍",
        "I suppose I am, yes.",
        "ja",
        "jaaa",
        "schon",
        "manchmal",
        "eher ja",
        "Vielleicht.",
        "ehrlich gesagt ja",
        "na ja, schon irgendwie",
        "Scho. Manchmol.",
        "jo",
    ],
)
def test_affirmations_of_our_check_in(answer: str) -> None:
    assert classify_answer("suicide", answer) == "affirmed"


@pytest.mark.parametrize(
    "answer",
    [
        "no",
        "nope",
        "Nein.",
        "nee, echt nicht",
        "no no",
        "haha no, my in-laws are visiting",
        "no, I just meant the move wore me out",
        "Nein, ich meinte nur die Prüfungsphase",
        "no, with my thesis draft! not sick of life",
    ],
)
def test_denials_of_our_check_in(answer: str) -> None:
    assert classify_answer("suicide", answer) == "denied"


@pytest.mark.parametrize(
    "answer",
    [
        "I don't want to talk about it",
        "lass mal",
        "anyway, about my running plan",
        "...",
        "hm",
        "Why you ask me such thing?",
        "Maybe I should try running in the mornings instead, what do you think about that",
    ],
)
def test_anything_else_is_unclear(answer: str) -> None:
    assert classify_answer("suicide", answer) == "unclear"


@pytest.mark.parametrize(
    "answer",
    [
        # A yes stretched or typed a key off ("jq" on a German keyboard).
        "yeahh",
        "jq",
        # How long or how often is a yes.
        "eh. seit wochn",
        "on and off since the funeral, yeah",
        "for months now",
        # An admission, or a question back that admits it.
        "more than I'd like to admit",
        "is it that obvious?",
        "und wenns so wär? was dann",
    ],
)
def test_a_yes_said_by_how_long_or_as_an_admission(answer: str) -> None:
    assert classify_answer("suicide", answer) == "affirmed"


@pytest.mark.parametrize(
    "answer",
    [
        "nei nei",
        "nei, sicher nöd",
        "na. sicher ned",
        "na, sicha ned",
        "Nein, keine Sorge, daran denke ich nicht.",
    ],
)
def test_swiss_and_austrian_noes_and_a_negated_thought_are_denials(answer: str) -> None:
    assert classify_answer("suicide", answer) == "denied"


@pytest.mark.parametrize("answer", ["not really", "nicht wirklich", "eher nicht", "na sicher"])
def test_a_hedged_no_is_asked_again(answer: str) -> None:
    # "not really" minimises; "na sicher" is "sure" (not a no): neither closes it.
    assert classify_answer("suicide", answer) == "unclear"


def test_a_time_that_is_over_is_no_yes() -> None:
    assert classify_answer("suicide", "no, not for months now") == "denied"
    assert classify_answer("suicide", "Nein, nicht mehr seit der Therapie") == "denied"


@pytest.mark.parametrize(
    "answer",
    [
        "no, that was 8 years ago. I'm in a good place.",
        "Nein, das ist zehn Jahre her, mir geht's gut.",
        "no! i mean a lie-in. i'm knackered, not suicidal",
        "Letzter Tag im Callcenter! Ab Montag fang ich die Ausbildung an",
    ],
)
def test_a_no_that_dates_or_explains_the_words_is_safe(answer: str) -> None:
    assert classify_answer("safety", answer) == "safe"


def test_a_past_attempt_told_with_a_no_is_not_an_explanation() -> None:
    # History alone is no denial: "it is back" beside it keeps the protective reading.
    assert classify_answer("safety", "no. i tried ten years ago and it is back") == "unsafe"
    assert classify_answer("suicide", "yes. i tried ten years ago too") == "affirmed"


def test_a_no_that_names_a_day_or_a_means_is_not_believed() -> None:
    assert (
        classify_answer("suicide", "no. it's all sorted for friday, I've got the pills")
        == "affirmed"
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("yes, my sister is here", "safe"),
        ("ja, bin sicher, danke", "safe"),
        ("no", "unsafe"),
        ("not really", "unsafe"),
        ("I don't know", "unsafe"),
        ("sometimes", "unsafe"),
        ("Na. I woaß ned, ob i de Nacht übersteh.", "unsafe"),
        ("yes 😔", "unsafe"),
        ("Yes, I'm safe. I gave the pills to my neighbour this morning.", "safe"),
        ("no, definitely not. I meant the marathon plan", "safe"),
        # A hedged yes is not believed as safe: asked again gently.
        ("ja glaub schon", "unclear"),
        ("yeah I think so", "unclear"),
        ("I guess", "unclear"),
        # "yes, a little" in dialect: a little safe is not safe.
        ("jo, scho e chli", "unsafe"),
        # A Swiss "not really, no" is a no to "are you safe?".
        ("nöd würkli, nei", "unsafe"),
    ],
)
def test_answers_to_are_you_safe(answer: str, expected: str) -> None:
    assert classify_answer("safety", answer) == expected


def test_yes_to_our_check_in_is_a_crisis_at_high() -> None:
    chat = Chat()
    first = chat.say("Ich will einfach nicht mehr.")
    assert needs_check_in(first.screen)  # our reply asks the direct question
    assert chat.state is not None and chat.state.open_check_in is not None
    assert chat.state.open_check_in.question == "suicide"
    answer = chat.say("ja")
    assert answer.answered == "affirmed"
    assert answer.screen.category is CrisisCategory.SUICIDAL_IDEATION
    assert answer.screen.basis == "check_in_answer"
    assert review_severity(answer.screen) == "high"
    # The crisis reply asks "are you safe right now?": that question is open now.
    assert chat.state.open_check_in is not None
    assert chat.state.open_check_in.question == "safety"


def test_yes_with_a_time_is_critical() -> None:
    chat = Chat()
    chat.say("I just want it all to stop.")
    answer = chat.say("yes, this weekend")
    assert is_crisis(answer.screen) and answer.screen.plan
    assert review_severity(answer.screen) == "critical"


def test_not_safe_after_a_crisis_reply_is_critical() -> None:
    chat = Chat()
    first = chat.say("I want to kill myself.")
    assert is_crisis(first.screen)
    answer = chat.say("no")
    assert answer.answered == "unsafe"
    assert review_severity(answer.screen) == "critical"


def test_a_denial_is_believed_and_kept() -> None:
    chat = Chat()
    chat.say("I'm just so done with everything.")
    answer = chat.say("no, I just meant the move wore me out")
    assert answer.answered == "denied"
    assert not is_crisis(answer.screen) and not needs_check_in(answer.screen)
    assert chat.state is not None and chat.state.open_check_in is None
    assert [c.answer for c in chat.state.check_ins] == ["denied"]
    # What made us ask is explained: it no longer adds to the trajectory.
    assert not [c for c in chat.state.risk_cues if c.turn == 1]


def test_unclear_asks_again_then_stops_asking() -> None:
    chat = Chat()
    chat.say("Ich will einfach nicht mehr.")
    again = chat.say("lass mal")
    assert needs_check_in(again.screen) and again.screen.question == "suicide"
    assert review_severity(again.screen) == "moderate"
    assert chat.state is not None and chat.state.open_check_in is not None
    assert chat.state.open_check_in.asks == conversation_book().max_asks
    third = chat.say("können wir über meinen Laufplan reden?")
    # Asked as often as we ask: no third question, a caring turn instead.
    assert third.answered == "unclear"
    assert not needs_check_in(third.screen) and not is_crisis(third.screen)


def test_the_check_in_expires_after_its_window() -> None:
    chat = Chat()
    chat.say("I just want it all to stop.")
    late = chat.say("yes", after=conversation_book().window + timedelta(minutes=1))
    assert late.answered is None and not is_crisis(late.screen)
    assert chat.state is not None
    assert [c.answer for c in chat.state.check_ins] == ["expired"]
    assert any(c.family == "check_in" for c in chat.state.risk_cues)


def test_a_plan_told_in_pieces_escalates_on_the_last_piece() -> None:
    chat = Chat()
    pieces = [
        "Gave away my bike and my records this week.",
        "Can you help me plan my week? Work is busy.",
        "It'll all be sorted by the weekend.",
    ]
    readings = [chat.say(p) for p in pieces]
    assert [is_crisis(r.screen) for r in readings] == [False, False, True]
    assert not any(needs_check_in(r.screen) for r in readings[:2])
    last = readings[-1]
    assert last.screen.basis == "trajectory" and last.screen.plan
    assert review_severity(last.screen) == "critical"


def test_a_piece_the_learned_reader_reads_as_risk_is_asked_about_not_counted_twice() -> None:
    # Letters to the family: no rule calls it a crisis, the learned reader reads it
    # as the crisis corpus's risk, so we ask. Its n-grams are the farewell's own
    # words, so the message does not complete a warning pattern by itself.
    chat = Chat()
    first = chat.say("I wrote letters to my mum and my brother today, just in case.")
    assert needs_check_in(first.screen) and not is_crisis(first.screen)
    assert any(m.startswith("learned: ") for m in first.screen.matched)
    assert chat.state is not None and chat.state.open_check_in is not None
    assert not any(c.family == "check_in" for c in chat.state.risk_cues)
    # And a yes to the question is the crisis it always was.
    assert is_crisis(chat.say("yeah").screen)


def test_signs_decay_a_month_apart_do_not_add_up() -> None:
    chat = Chat()
    chat.say("I wrote letters to my parents and my sister today.")
    late = chat.say("It'll all be sorted by the weekend.", after=timedelta(days=30))
    assert not is_crisis(late.screen)


def test_a_harmless_reason_explains_the_pieces() -> None:
    chat = Chat()
    chat.say("I'm giving away most of my books and the sofa this week.")
    chat.say("We're moving to Lisbon in October and the flat there is tiny!")
    last = chat.say("Everything should be sorted by the weekend, can you help me pack?")
    assert not is_crisis(last.screen)


def test_a_reader_ahead_of_the_writer_gets_the_folded_answer() -> None:
    # Coach may read a state Stability already folded this very turn into.
    chat = Chat()
    chat.say("Ich will einfach nicht mehr.")
    before = chat.state
    answer = chat.say("ja")
    again = read_turn(chat.state, "ja", "t2", chat.now)
    assert again.screen == answer.screen and again.answered == "affirmed"
    assert before is not None and open_question(before, chat.now) is not None


def test_the_model_sees_the_question_and_the_signs() -> None:
    chat = Chat()
    chat.say("Nothing matters much these days.")
    data = dict(context_for_model(chat.state, chat.now))
    assert any("question our last reply asked" in k for k in data)
    assert "ending your life" in next(v for k, v in data.items() if "question" in k)
    assert "hopelessness" in next(v for k, v in data.items() if "warning signs" in k)


def test_a_short_answer_is_its_own_evidence() -> None:
    claim = RiskScreenCall(
        category=CrisisCategory.SUICIDAL_IDEATION, confidence=0.9, evidence=["eher ja"]
    )
    assert check_claim(claim, "eher ja")  # alone, too short to show anything
    assert check_claim(claim, "eher ja", answering=True) == []
    invented = RiskScreenCall(
        category=CrisisCategory.SUICIDAL_IDEATION, confidence=0.9, evidence=["I have a plan"]
    )
    assert check_claim(invented, "eher ja", answering=True)


def test_every_pattern_names_known_families() -> None:
    book = conversation_book()
    known = {*book.cues, "check_in", "crisis"}
    for w in book.warnings:
        for group in w.needs:
            assert group <= known, (w.name, group - known)
        assert w.why


# --------------------------------------------------------------------------- the ladder
# A crisis on a warning sign without the words of suicide (a burden, hopelessness) is
# followed by the direct question about suicidal thoughts; thoughts told in so many
# words by "are you safe right now?" (content/crisis/rules.toml, [asks]).


@pytest.mark.parametrize(
    "message",
    [
        "Honestly everyone would be better off without me.",
        "Ich bin doch nur eine Last für alle.",
    ],
)
def test_a_burden_crisis_asks_the_direct_question(message: str) -> None:
    chat = Chat()
    first = chat.say(message)
    assert is_crisis(first.screen) and first.screen.asks == "suicide"
    assert chat.state is not None and chat.state.open_check_in is not None
    assert chat.state.open_check_in.question == "suicide"
    # "ja" answers the question we asked: thoughts of suicide, at high; the reply to
    # that asks the next rung, "are you safe right now?".
    answer = chat.say("ja")
    assert answer.answered == "affirmed"
    assert answer.screen.category is CrisisCategory.SUICIDAL_IDEATION
    assert answer.screen.asks is None
    assert review_severity(answer.screen) == "high"
    assert chat.state.open_check_in is not None
    assert chat.state.open_check_in.question == "safety"


def test_thoughts_said_outright_ask_about_safety_even_beside_a_burden() -> None:
    chat = Chat()
    first = chat.say("Everyone would be better off without me. I want to kill myself.")
    assert is_crisis(first.screen) and first.screen.asks is None
    assert chat.state is not None and chat.state.open_check_in is not None
    assert chat.state.open_check_in.question == "safety"


def test_a_no_to_the_direct_question_after_a_burden_crisis_is_believed() -> None:
    chat = Chat()
    chat.say("Honestly everyone would be better off without me.")
    answer = chat.say("no, not like that. I meant at work, I keep dropping the ball.")
    assert answer.answered == "denied"
    assert not is_crisis(answer.screen)


@pytest.mark.parametrize(
    ("answer", "read"),
    [
        # A no that shows hopelessness itself is not believed: asked again.
        ("no. nothing is ever going to change anyway", "unclear"),
        ("nein. es hat eh alles keinen sinn mehr", "unclear"),
        # A farewell act in answer to the direct question is a yes.
        ("I gave my guitar and my books to my sister yesterday.", "affirmed"),
        # "to answer your question: yes" names itself.
        ("Um Ihre Frage zu beantworten: ja.", "affirmed"),
        # An explanation after a comma is one ("Ich meinte, ...").
        ("Nein. Ich meinte, ich kann nicht mehr in Vollzeit arbeiten.", "denied"),
        # A yes that accepts a coaching offer answers the coaching question: asked again.
        ("yeah ok lets do that", "unclear"),
        ("jo gärn", "unclear"),
        ("nee, wozu noch lernen, die klausur ist eh verkackt. also nicht so gemeint", "denied"),
    ],
)
def test_answers_to_the_direct_question(answer: str, read: str) -> None:
    assert classify_answer("suicide", answer) == read


def test_a_first_disclosure_is_no_yes_to_are_you_safe() -> None:
    # "Yes. I've never said that out loud before" confirms the thoughts, not safety.
    assert classify_answer("safety", "Yes. I've never said that out loud before.") == "unsafe"
    assert classify_answer("safety", "Yes, I'm safe, my sister is here with me.") == "safe"
    assert classify_answer("safety", "yes, safe right now. seeing my GP on Thursday") == "safe"
    # A "no" that explains the words that made us ask (overstated, a past long over)
    # is no "not safe".
    assert classify_answer("safety", "nee wirklich nicht. war übertrieben, kaum geschlafen") == (
        "safe"
    )
    assert classify_answer("safety", "no, not for years. i'm 31 now and doing well") == "safe"
    assert classify_answer("safety", "i don't think so. i'm in the car up on the cliff road") == (
        "unsafe"
    )


@pytest.mark.parametrize(
    ("opening", "asks"),
    [
        # A major loss with a low state: the direct question, so "ja" can answer it.
        ("my wife moved out with the kids on sunday. the flat is so quiet", True),
        ("Seit der Scheidung ist alles so grau.", True),
        # Losses piling up in one message.
        ("wurde heute exmatrikuliert und meine freundin hat schluss gemacht", True),
        # A means at hand in distress.
        ("the farm's finished, the bank gets the house. dad's old shotgun is still here", True),
        # Each alone is coaching: a loss told plainly, a rope for a climbing course.
        ("my grandad died last spring, I want to finish the marathon he never ran", False),
        ("bought a 60m rope and a harness today, climbing course on saturday", False),
    ],
)
def test_a_loss_with_a_low_state_or_a_means_makes_the_reply_ask(opening: str, asks: bool) -> None:
    reading = Chat().say(opening)
    assert needs_check_in(reading.screen) is asks, (opening, reading.signs)  # type: ignore[attr-defined]


def test_yes_after_a_loss_and_a_low_state_is_a_disclosure() -> None:
    chat = Chat()
    chat.say("Meine Freundin ist ausgezogen. Ich hab jetzt echt niemanden mehr.")
    reading = chat.say("ja 😔")
    assert reading.screen.category is CrisisCategory.SUICIDAL_IDEATION  # type: ignore[attr-defined]
    assert reading.answered == "affirmed"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "opening",
    [
        "TB test came back positive. the farm's finished. dad's old shotgun is still here",
        "hab heut erfahren dass mein freund mich seit nem jahr betrügt. ich hab niemanden mehr",
        "lost the house deposit at the casino. my partner doesn't know yet",
        "Die Kinder wohnen jetzt beim Vater. Die Wohnung ist so still.",
    ],
)
def test_round_six_wordings_of_a_loss_ask(opening: str) -> None:
    # Each of these was meant by round 6's cue lists and read by none of them (the
    # apostrophe the normaliser drops, "doesn't" read as "does not", a word order).
    assert needs_check_in(Chat().say(opening).screen)  # type: ignore[attr-defined]


def test_a_heavy_message_no_rule_reads_is_asked_about_in_the_conversation() -> None:
    # The message screen reads no risk (its corpus calls a hard week "no crisis"); the
    # conversation reader's learned reader of when our reply asks reads what the
    # conversations corpus's writers asked about: a job lost after many years, and the
    # shame of how. (Which heavy message it reads moves with each retrain; this one is
    # from conversations dev, reworded.)
    said = (
        "lost my job today after 11 years. they walked me out with a cardboard box like a criminal"
    )
    chat = Chat()
    first = chat.say(said)
    assert not needs_check_in(first.message_screen) and not is_crisis(first.message_screen)
    assert first.outcome == LEARNED_ASK
    assert needs_check_in(first.screen) and not is_crisis(first.screen)
    assert first.screen.matched[0].startswith("learned: ")
    # Asked, so the next "yeah" is an answer we can read: the disclosure it is.
    assert chat.state is not None and chat.state.open_check_in is not None
    # The learned reader's n-grams are no warning sign of their own: the cues kept are
    # the rules' signs of the message, nothing more.
    assert {c.family for c in chat.state.risk_cues} == {f for f, _ in signs_in(said)}
    assert is_crisis(chat.say("yeah").screen)


@pytest.mark.parametrize(
    "said",
    [
        # Ordinary coaching talk, a hard week handled, too few words, and risk words a
        # guard set aside: the message screen's reading stands.
        "Can you help me plan my meals for the week? I want to eat more vegetables.",
        "rough week at work but I got through it, can we plan next week's runs?",
        "lost my job",
        "this deadline is killing me, can we plan the week",
    ],
)
def test_the_learned_ask_leaves_ordinary_talk_alone(said: str) -> None:
    reading = read_turn(None, said, "t1", T0)
    assert reading.outcome != LEARNED_ASK
    assert not needs_check_in(reading.screen)


@pytest.mark.parametrize(
    ("said", "left"),
    [
        # No rule reads these: only the learned reader decides whether we ask (the
        # heavy one above, asked, and plain coaching talk alike).
        (
            "lost my job today after 11 years. they walked me out with a cardboard box like "
            "a criminal",
            True,
        ),
        ("Can you help me plan my meals for the week? I want to eat more vegetables.", True),
        # The rules decided: a sign that asks, a crisis, too few words to read.
        ("I don't see the point in anything anymore.", False),
        ("I want to kill myself tonight.", False),
        ("lost my job", False),
    ],
)
def test_left_to_learned_names_the_first_messages_only_the_learned_reader_decides(
    said: str, left: bool
) -> None:
    # The population on which that reader's precision is measured when it is trained:
    # pooled with the plain risks the rules catch first, its bar would look more
    # precise than it is where it acts.
    assert left_to_learned(said) is left


def test_the_learned_ask_waits_for_an_answer_to_the_open_question() -> None:
    # With our question open, the message is its answer first: the ask reader does not
    # turn an unclear answer into a fresh question.
    chat = Chat()
    chat.say("Ich will einfach nicht mehr.")
    reading = chat.say("hab mich verzockt, 40k miese auf dem kreditrahmen. zuhause weiß keiner was")
    assert reading.outcome != LEARNED_ASK
    assert reading.answered is not None


@pytest.mark.parametrize(
    "said",
    [
        "life policy's paid up, made sure it's past the two year bit",
        "sorted my bank stuff so my brother can get into it all",
        "Hab mit der Versicherung telefoniert, dass die Familie abgesichert is.",
        "hab die Versicherungsunterlagen sortiert und für meine Frau alles in einen Ordner gelegt",
    ],
)
def test_affairs_put_in_order_for_the_family_are_a_farewell_sign(said: str) -> None:
    assert "farewell" in {f for f, _ in signs_in(said)}


def test_a_plan_told_in_pieces_after_our_check_in_escalates() -> None:
    # Asked about the burden, the pieces then come as answers: affairs put in order
    # (a farewell act given in answer to our question is a yes), then a means and a
    # time: a plan, critical.
    chat = Chat()
    assert needs_check_in(chat.say("bin für meine familie nur noch eine last").screen)
    second = chat.say("hab die versicherungsunterlagen sortiert, alles in einen ordner gelegt")
    assert is_crisis(second.screen) and second.answered == "affirmed"
    third = chat.say("der waffenschrank ist im keller. wenn sie nächste woche zur kur fährt")
    assert is_crisis(third.screen) and third.screen.plan
    assert review_severity(third.screen) == "critical"


def test_a_way_up_and_no_way_down_is_a_time() -> None:
    assert "time" in {
        f for f, _ in signs_in("Am Sonntag fahr i auf'n Berg. Von durt kumm i nimma owa.")
    }


@pytest.mark.parametrize(
    "answer",
    ["würde das denn jemanden interessieren?", "would it even matter if I was?"],
)
def test_a_question_back_about_whether_anyone_would_care_is_a_yes(answer: str) -> None:
    # Weighing one's own worth is no denial: the protective reading is a yes.
    assert classify_answer("suicide", answer) == "affirmed"


@pytest.mark.parametrize(
    "answer",
    [
        "Besser. Ich habe eine Trauergruppe gefunden, donnerstags wandern wir.",
        "lol not disappear like THAT. i mean a cabin with no wifi. i'm fine",
        "meal prepping!! nothing darker than that i promise",
    ],
)
def test_a_no_that_says_things_are_better_or_not_like_that_is_believed(answer: str) -> None:
    assert classify_answer("suicide", answer) == "denied"


def test_a_plan_told_in_pieces_in_a_dialect_escalates() -> None:
    # Conversations dev round 9 (Bavarian): a burden, the children's care arranged
    # "if anything happens to me", then the weekend it is "so weit".
    chat = Chat()
    chat.say("Meine Buam warn ohne mi besser dran, ehrlich.")
    chat.say("Hob heid mei Schwester gfragt, ob's de Buam nehma dad, wenn mir wos passiert.")
    last = chat.say("Erleichtert. Des Wochenend is dann soweit.")
    assert last.screen.category is CrisisCategory.SUICIDAL_IDEATION


@pytest.mark.parametrize(
    "answer",
    ["how did you know", "Would it be bad if I said yes?", "woher weißt du das?"],
)
def test_we_guessed_right_or_may_i_say_yes_is_a_yes(answer: str) -> None:
    # Conversations dev round 10: neither is a no; the protective reading is a yes.
    assert classify_answer("suicide", answer) == "affirmed"


@pytest.mark.parametrize(
    ("said", "family"),
    [
        ("I mog in da Friah gar nimma aufwacha.", "hopelessness"),
        ("I honestly can't picture a version of next year that's any better.", "hopelessness"),
        ("feels like I've already left and just haven't gone yet", "hopelessness"),
        ("Es isch alles so lär i mir inne.", "hopelessness"),
        ("könnt morgen fehlen und keinem würds auffallen", "burden"),
        ("Ich komme mir überflüssig vor.", "burden"),
        ("My old service pistol's still in the closet.", "means"),
        ("I think about it more than I should.", "thoughts"),
        # Conversations dev round 12: first messages without a word of death.
        ("smiled at everyone and felt absolutely nothing", "hopelessness"),
        ("I don't see much reason to get up in the mornings any more.", "hopelessness"),
        ("rent's due on the 1st, partner left in the summer. every door's shut", "hopelessness"),
        ("Null Bock auf alles.", "hopelessness"),
        ("havent had a proper meal since monday, i just lie there staring at the ceiling", "low"),
        ("firm went under in june and i owe revenue more than the house is worth", "loss"),
        ("There's a bridge on the way in. I slow down every time I cross it", "thoughts"),
        ("ja. ich hab mir den 30. ausgesucht, da läuft der mietvertrag aus", "time"),
    ],
)
def test_everyday_words_of_the_warning_signs(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


def test_several_signs_of_a_low_state_in_one_message_are_asked_about() -> None:
    # Not sleeping, not eating, everything grey: the symptom cluster after which the
    # screening notes ask the direct question; one sign alone is ordinary talk.
    assert needs_check_in(Chat().say("kann nich schlafen, kann nich essen, alles grau").screen)
    assert not needs_check_in(Chat().say("Exams next week, I can't sleep properly.").screen)


def test_a_yes_then_a_weapon_kept_and_thoughts_of_it_is_a_crisis() -> None:
    last = Chat().say("Yeah. My old service pistol's still in the closet. I think about it a lot.")
    assert is_crisis(last.screen)


@pytest.mark.parametrize("answer", ["Ja. Scho seit a paar Wocha.", "yes, for a few weeks now"])
def test_a_yes_that_says_for_how_long_is_no_safe_to_are_you_safe(answer: str) -> None:
    # Conversations dev round 10: "how long" answers the thoughts, not the safety.
    assert classify_answer("safety", answer) == "unsafe"


@pytest.mark.parametrize(
    ("question", "answer", "reading"),
    [
        # Conversations dev round 11: a past told as over and a present that is good,
        # a no that says which way it was not meant, safety said in so many words.
        ("safety", "Nein, nein. Das ist vorbei. Ich habe Hilfe bekommen.", "safe"),
        ("suicide", "not now, no. that was years ago and I got proper help, it lifted", "denied"),
        ("suicide", "neee alter das sagt man halt so 😂 mir gehts gut", "denied"),
        ("safety", "yes. safe. on the sofa with the dog, just need to get through it", "safe"),
        ("safety", "The relationship! I'm not in any danger, I just need help.", "safe"),
        # A yes to "are you safe?" that goes on to say the thoughts come is not safe.
        ("safety", "Yes. Sometimes I think this, at night after work.", "unsafe"),
        # Everything said to be ready, with the time come, answers our question: yes.
        ("suicide", "morgen früh ist es soweit. hab alles was ich brauch", "affirmed"),
        # Everything ready alone, with no time or means named, answers it too.
        ("suicide", "hab alles was ich brauch.", "affirmed"),
    ],
)
def test_answers_of_conversations_dev_round_11(question: str, answer: str, reading: str) -> None:
    assert classify_answer(question, answer) == reading  # type: ignore[arg-type]


def test_a_harmless_reason_explains_a_goodbye_at_work_and_a_pill_box() -> None:
    assert "harmless" in {f for f, _ in signs_in("41 Johr bei da Post. Ab Montag bin i Rentner")}
    assert "harmless" in {f for f, _ in signs_in("Ich hab ihr so eine Wochenbox gekauft.")}
    # Giving everything to an animal shelter is the farewell act, not its reason.
    said = "hab heute mein sparkonto aufgelöst und alles dem tierheim gespendet"
    assert "harmless" not in {f for f, _ in signs_in(said)}


def test_furious_not_hopeless_is_a_no_and_no_sign() -> None:
    said = "No. I'm furious, not hopeless. I want to win this, not quit."
    assert "hopelessness" not in {f for f, _ in signs_in(said)}
    assert classify_answer("suicide", said) == "denied"


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev round 13: openers of a quiet crisis in daily-life words.
        (
            "My dad pulled strings to get me in there. I honestly don't know what I'm for.",
            "hopelessness",
        ),
        ("S'bringt doch alles nüt.", "hopelessness"),
        ("I siech ka Licht mehr am End vom Tunnel.", "hopelessness"),
        ("Ich sehe nicht, wie das noch besser werden soll.", "hopelessness"),
        ("Ich bin wirklich niemandem mehr von Nutzen.", "burden"),
        ("Rex was put down on Tuesday.", "loss"),
        ("Our IVF round failed again. The fourth.", "loss"),
        ("lost my licence, lost my job because of it", "loss"),
        ("Mein Mann will nicht drüber reden, also red ich mit keinem.", "low"),
        ("been in bed since thursday. work thinks i have flu", "low"),
        ("i used to care about it so much and now i just... dont", "low"),
        ("gave my good winter coat to the neighbour today", "farewell"),
        ("Thank you for all the chats. I won't need the reminders after this week.", "farewell"),
        ("Hab ma an Zettl gschrieben für mei Mama. Liegt am Kuchltisch.", "farewell"),
        ("went to two different pharmacies today", "means"),
        ("hab mir ein paar packungen schmerztabletten geholt. auf vorrat", "means"),
        ("after my shift friday. then it stops", "time"),
    ],
)
def test_everyday_words_of_conversations_dev_round_13(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # "no doctor, no pills" (stopping drinking alone), a father's heart pills and a
        # weekly pill box are no means; the pill box is the harmless reason.
        ("Tomorrow I pour it all down the sink. No doctor, no pills.", "means"),
        ("He keeps forgetting whether he's had his heart pills.", "means"),
    ],
)
def test_pills_that_are_no_means(said: str, family: str) -> None:
    assert family not in {f for f, _ in signs_in(said)}, said
    assert "harmless" in {f for f, _ in signs_in("Bought one of those weekly pill boxes today.")}


@pytest.mark.parametrize(
    ("question", "answer", "reading"),
    [
        # Conversations dev round 13: "scho" alone is a yes; a yes that dates the plan
        # by a wedding is a yes (the wedding explains nothing); a yes with a sister
        # staying is safe; "im Moment eher nicht, nein" and "na. ned wirklich" to "are
        # you safe?" are not safe; "yeah that would help" takes a coaching offer.
        ("suicide", "scho", "affirmed"),
        ("suicide", "Yes. I've decided it'll be after my sister's wedding in June.", "affirmed"),
        (
            "suicide",
            "Manchmal denke ich, wenn er ins Heim kommt, dann kann ich auch gehen.",
            "affirmed",
        ),
        ("safety", "Ja, bin ich. Meine Schwester schläft heute bei mir.", "safe"),
        ("safety", "Im Moment eher nicht, nein.", "unsafe"),
        ("safety", "na. ned wirklich", "unsafe"),
        ("suicide", "yeah that would help", "unclear"),
    ],
)
def test_answers_of_conversations_dev_round_13(question: str, answer: str, reading: str) -> None:
    assert classify_answer(question, answer) == reading  # type: ignore[arg-type]


def test_a_plan_told_in_pieces_as_answers_to_our_question_escalates() -> None:
    # Conversations dev round 13: asked about "so done with all of it", the answers
    # are pharmacies and a day with an end: a means and a time, not an unclear answer.
    chat = Chat()
    assert needs_check_in(chat.say("i'm so done. with all of it.").screen)
    second = chat.say("went to two different pharmacies today")
    third = chat.say("after my shift friday. then it stops")
    assert is_crisis(second.screen) or is_crisis(third.screen)
    assert third.screen.category is CrisisCategory.SUICIDAL_IDEATION


def test_a_loss_and_a_low_state_of_round_13_ask() -> None:
    said = "Seit der Fehlgeburt im Sommer bin ich wie aus Glas. Also red ich mit keinem."
    assert needs_check_in(Chat().say(said).screen)
    two = (
        "Haven't opened my laptop in 3 weeks. I used to care about it so much and now I just dont."
    )
    assert needs_check_in(Chat().say(two).screen)


def test_a_sudden_calm_after_the_crisis_reply_is_asked_about_directly() -> None:
    # Not believed as safe, and not "are you safe?" again: the direct question about
    # thoughts of ending one's life (a rule now; it rested on the learned reader).
    assert classify_answer("safety", "I'm a bit calmer now.") == "unclear"
    assert classify_answer("safety", "Ich bin jetzt ganz ruhig.") == "unclear"
    chat = Chat()
    assert is_crisis(chat.say("I want to kill myself.").screen)
    calm = chat.say("I feel at peace now.")
    assert needs_check_in(calm.screen) and calm.screen.question is None
    # With no crisis reply before it, a calm is no answer to our question.
    plain = Chat().say("After the walk I'm a bit calmer now.")
    assert "a sudden calm after our crisis reply" not in plain.screen.matched


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev round 14: strain told as the facts of daily life.
        ("Our son starts his second round of chemo on Monday.", "loss"),
        ("Company restructured and I'm on the list.", "loss"),
        ("14 months clean and i used on saturday.", "loss"),
        ("got sacked from my apprenticeship today and my dad said dont bother coming home", "loss"),
        ("Meine Duldung wird nicht verlängert, sagt die Ausländerbehörde.", "loss"),
        ("Räumungsklage. Termin in 3 Wochen.", "loss"),
        ("I haven't cried once in front of him. I do it in the hospital car park.", "low"),
        ("i look at her and feel nothing. what kind of mother feels nothing", "low"),
        ("heute hab ich im Bad gestanden und einfach nur die Fliesen angestarrt", "low"),
        ("my parents think i'm doing fine. i haven't been to a lecture since october", "low"),
        ("Geht nimmer.", "hopelessness"),
        ("Meine Frau sagt, wird schon. Wird nicht.", "hopelessness"),
        ("i lieg nur mehr im bett. wird eh nix mehr aus mir", "hopelessness"),
        ("wrote a long message to my mum. it's scheduled to send sunday morning", "farewell"),
        ("sogts meim bruader dass er mei playstation kriagt und dass i eam gern hob", "farewell"),
        ("by the time she reads it it'll be done", "time"),
        ("I've brought home what I need from the ward. Thursday.", "means"),
    ],
)
def test_everyday_words_of_conversations_dev_round_14(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


@pytest.mark.parametrize(
    "said",
    [
        # A climbing partner who dropped out is no loss; a bank card and a job centre
        # visit told as progress asks nothing on its own.
        "Avalanche bulletin says level 4 and my partner dropped out.",
    ],
)
def test_a_partner_who_dropped_out_is_no_loss(said: str) -> None:
    assert "loss" not in {f for f, _ in signs_in(said)}


@pytest.mark.parametrize(
    ("question", "answer", "reading"),
    [
        # "dunno" (normalised "do not know") to "are you safe?" is not safe, and a yes
        # to our question; "would be a start" takes a coaching offer; "every day" in
        # the middle of a message about a household book answers nothing.
        ("safety", "dunno", "unsafe"),
        ("suicide", "dunno", "affirmed"),
        ("suicide", "yes. phone off after 7 would be a start", "unclear"),
        (
            "suicide",
            "Ich führe seit einem Jahr ein Haushaltsbuch, jeden Tag, und lese über Geldanlage.",
            "unclear",
        ),
        ("suicide", "jeden Tag, ehrlich gesagt", "affirmed"),
    ],
)
def test_answers_of_conversations_dev_round_14(question: str, answer: str, reading: str) -> None:
    assert classify_answer(question, answer) == reading  # type: ignore[arg-type]


def test_two_losses_of_daily_life_ask_the_check_in() -> None:
    said = "got sacked from my apprenticeship today and my dad said dont bother coming home"
    assert needs_check_in(Chat().say(said).screen)


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev rounds 15 and 16: feeling and caring for nothing, losses and
        # low states of daily life, plans told in pieces.
        (
            "16 hr days. cant remember the last time i felt anything that wasnt noise",
            "hopelessness",
        ),
        ("I spür nüt meh, weder Freud no süscht öppis.", "hopelessness"),
        (
            "Third flare this year. I stopped telling people, what would be the point.",
            "hopelessness",
        ),
        ("sanctioned again cos i missed an appointment", "loss"),
        ("got a DUI. lose the CDL, lose the truck, lose the house.", "loss"),
        ("The app deactivated my account this morning. That was my whole income.", "loss"),
        ("I haven't left the bedroom since Friday.", "low"),
        ("kann seit wochen nicht richtig essen, alles schmeckt nach pappe", "low"),
        ("the kids would be better off if my mum raised them", "burden"),
        ("Die Kleinen sind ohne so einen Vater besser dran.", "burden"),
        ("I have cancelled the newspaper and the milk delivery.", "farewell"),
        ("ive put the life insurance papers on the kitchen table", "farewell"),
        ("tell my sponsor i'm sorry. this is the last you'll hear from me", "farewell"),
        ("Sunday morning when the wife's at church. That's the plan.", "day"),
        ("Is olles unterschriebn. I woaß scho wia.", "ready"),
    ],
)
def test_everyday_words_of_conversations_dev_rounds_15_and_16(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


@pytest.mark.parametrize(
    ("answer", "reading"),
    [
        # A no that goes on to the thoughts, "I'd be lying if I said no" and not being
        # sure are a yes; a no that ends on "not that", or a yes only for back then, is
        # a no. "Aber machen würd ich das nicht" after a yes stays a yes: only a no at
        # the start (or a past named) makes "not that" a denial.
        ("eigentlich nein aber wenn er schläft denk ich schon dran", "affirmed"),
        ("I'd be lying if I said no, love.", "affirmed"),
        ("Nei. I bi mer nöd sicher.", "affirmed"),
        ("vllt. weiß nicht", "affirmed"),
        ("i do but i'd never, she needs me. it's just there in the background", "affirmed"),
        ("Ja, ich denk dran. Aber machen würd ich das nicht.", "affirmed"),
        ("Nein. Traurig ja, aber das nicht.", "denied"),
        ("no. I thought about it properly and no. I'm flat and bored, not that.", "denied"),
        ("back then yes, a lot. not now. I'm 34, I've got my kids.", "denied"),
        ("Heute nicht mehr, nein. Das war vor fünf Jahren.", "denied"),
    ],
)
def test_answers_of_conversations_dev_rounds_15_and_16(answer: str, reading: str) -> None:
    assert classify_answer("suicide", answer) == reading


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev round 17: goodbyes for good, hopelessness and a burden in
        # everyday words, means at hand, how others see the writer.
        ("thanks for trying with me. bye. really, bye.", "farewell"),
        ("Danke dass du zuhörst. Sag niemand. Tschüss für immer.", "farewell"),
        ("Tell the lad I'm sorry about the fishing. Ta-ra.", "farewell"),
        ("i dont blame them. ive given up too. it's never getting better", "hopelessness"),
        ("Dat wird nix mehr mit mir. Die Lunge, die Knie, der Kopp.", "hopelessness"),
        ("eigentlich egal. ohne mich hätten alle weniger stress", "burden"),
        ("after the weekend. i've got insulin at home and i know how much", "means"),
        ("Das Konzert ist am 12. Bis dahin bin ich weg. Die Nacht steht fest.", "day"),
        (
            "my colleagues have stopped inviting me. can't blame them, i wouldn't invite me either",
            "low",
        ),
    ],
)
def test_everyday_words_of_conversations_dev_round_17(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


@pytest.mark.parametrize(
    ("question", "answer", "reading"),
    [
        ("suicide", "I wouldn't say I'm planning anything. But yes, I think about it.", "affirmed"),
        ("suicide", "Wenn ich ehrlich bin, ja. Gerade wenn er weg ist.", "affirmed"),
        ("suicide", "Oh yes, I would like that very much.", "unclear"),
        ("safety", "I couldn't say. I've had a few whiskies.", "unsafe"),
        ("safety", "Ich weiß es nicht. Ich bin auf dem Balkon.", "unsafe"),
    ],
)
def test_answers_of_conversations_dev_round_17(question: str, answer: str, reading: str) -> None:
    assert classify_answer(question, answer) == reading  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev rounds 18 and 19 (own wording): affairs put in order for the
        # spouse, a scheduled e-mail, a policy that pays out, a goodbye for good; means
        # and a decided time; "I don't want to go on", "mag eh nimmer".
        (
            "Hab die Versicherungen durchgeschaut und alles für meinen Mann aufgeschrieben.",
            "farewell",
        ),
        ("hab meinem bruder ne mail vorgeplant", "farewell"),
        ("checked the life policy pays out now", "farewell"),
        ("gute nacht für immer", "farewell"),
        ("Grüßt meine Tochter von mir.", "farewell"),
        ("The shotgun's in the shed.", "means"),
        ("Ich steh auf dem Dach, sechster Stock.", "means"),
        ("Das Datum steht.", "time"),
        ("Sunday, when the family is at church.", "time"),
        ("i know where and when", "time"),
        ("I just don't want to go on.", "hopelessness"),
        ("Irgendwie mag i eh nimmer.", "hopelessness"),
        ("I wish a lorry would just hit me on the way home.", "hopelessness"),
        ("Ich funktioniere nur noch.", "low"),
    ],
)
def test_everyday_words_of_conversations_dev_rounds_18_and_19(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Not signs: prices through the roof, going on a trip, a festival one goes to.
        ("Rents are through the roof here.", "means"),
        ("I don't want to go on the school trip.", "hopelessness"),
        ("I don't want to go on with this course.", "hopelessness"),
    ],
)
def test_look_alikes_of_conversations_dev_rounds_18_and_19(said: str, family: str) -> None:
    assert family not in {f for f, _ in signs_in(said)}, said


def test_a_plan_told_in_answers_to_our_check_in_escalates() -> None:
    # Conversations dev round 18: after a burden message we ask; the answers are pieces
    # of a plan (the affairs put in order, then a time when the wife is away), not a yes
    # or a no, and together they are the warning pattern.
    chat = Chat()
    first = chat.say("Ich bin für alle nur noch ein Klotz am Bein.")
    assert first.screen.asks == "suicide"  # type: ignore[attr-defined]
    chat.say("Hab heute die Versicherungen durchgeschaut und alles für meine Frau aufgeschrieben.")
    last = chat.say("Sonntag. Dann ist sie bei ihrer Mutter.")
    assert is_crisis(last.screen)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("question", "answer", "reading"),
    [
        ("suicide", "yes! evenings are perfect, the gym is quiet after 8", "unclear"),
        ("suicide", "yeah ok, I'll try that on Monday", "unclear"),
        ("safety", "Yes. I've thought it through. I just wanted to tell someone before.", "unsafe"),
    ],
)
def test_answers_of_conversations_dev_rounds_18_and_19(
    question: str, answer: str, reading: str
) -> None:
    assert classify_answer(question, answer) == reading  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("said", "family"),
    [
        # Conversations dev round 20 (own wording): a sorry passed on, a console left to
        # a brother, savings moved, arrangements for whoever takes a dependant; tablets
        # laid out, a named bridge; a last month, the night booked, a fixed day; a known
        # spot; not trusting oneself.
        ("tell my mum sorry. bye", "farewell"),
        ("sag meiner schwester, sie soll meine gitarre behalten", "farewell"),
        ("moved my savings to my brother this morning", "farewell"),
        ("the dog's food and vet card are ready for whoever takes him", "farewell"),
        ("Hab alle Tabletten auf den Wohnzimmertisch gelegt.", "means"),
        ("dann fahr ich zur Elbbrücke", "means"),
        ("I won't see the end of the month.", "time"),
        ("Am Freitag, des is fix.", "time"),
        ("I know the place already.", "ready"),
        ("I don't trust myself tonight.", "thoughts"),
    ],
)
def test_everyday_words_of_conversations_dev_round_20(said: str, family: str) -> None:
    assert family in {f for f, _ in signs_in(said)}, said


def test_a_dental_bridge_is_no_means() -> None:
    assert "means" not in {f for f, _ in signs_in("Meine neue Zahnbrücke kommt morgen.")}


@pytest.mark.parametrize("answer", ["nö. eher nicht", "Naa. Bin ned sicher.", "no. probably not"])
def test_a_no_that_takes_itself_back_is_asked_again(answer: str) -> None:
    # A no, then a hedge: as minimised as the hedge alone, so the question stays open.
    assert classify_answer("suicide", answer) == "unclear"


def test_thoughts_of_an_unnamed_it_are_asked_about_and_with_a_gun_are_a_crisis() -> None:
    # "it" named by nobody: the direct question is how we learn what it is.
    assert needs_check_in(Chat().say("ja. ich denke oft daran in der Nacht").screen)
    # The same thoughts beside a weapon at hand: the warning pattern of thoughts with
    # a means (C-SSRS level 3), a crisis reviewed as a plan.
    chat = Chat()
    chat.say("Bin Jäger, schlafe seit Monaten kaum.")
    last = chat.say("Ja. Das Gewehr steht im Schrank, und ich denke jeden Abend daran.")
    assert is_crisis(last.screen) and last.screen.plan  # type: ignore[attr-defined]


def test_a_denial_that_names_the_word_and_a_course_given_up_are_believed() -> None:
    chat = Chat()
    chat.say("Mein Deutschkurs ist so schwer, ich will aufgeben.")
    last = chat.say("Nein, nein. Ich will nur den Kurs aufgeben, nicht das Leben.")
    assert not needs_check_in(last.screen) and not is_crisis(last.screen)  # type: ignore[attr-defined]
    said = "Nein, wirklich nicht. Ich mein weg aus dieser Stadt. Mit Suizid hat das nix zu tun."
    assert not is_crisis(Chat().say(said).screen)


def test_a_plan_told_as_errands_escalates_and_an_appointment_next_week_is_no_time() -> None:
    # The allotment passed on, a burden, then the will signed and the day named.
    chat = Chat()
    chat.say("Wrote to the council today, passing my allotment on to the young couple next door.")
    chat.say("Better they have it. I've been more trouble than I'm worth since the stroke.")
    last = chat.say("Solicitor's been, will's signed. Sunday's the day, it's quiet then.")
    assert is_crisis(last.screen)  # type: ignore[attr-defined]
    # "Die Rente reicht nicht" is money, not a retirement that explains the pieces.
    chat = Chat()
    chat.say("Hab meine Werkzeuge alle dem Nachbarsjungen geschenkt.")
    chat.say("Die Rente reicht hinten und vorne nicht. Ich lieg meinen Kindern nur auf der Tasche.")
    said = "Die Papiere fürs Bestattungsinstitut hab ich unterschrieben. Nächsten Dienstag."
    assert is_crisis(chat.say(said).screen)  # type: ignore[attr-defined]
    # A no with an appointment next week is believed.
    chat = Chat()
    chat.say("Hab auf gar nix mehr Bock. Seit der Trennung ist alles grau.")
    no = chat.say("Nein. Traurig ja, aber das nicht. Ab nächster Woche hab ich Termine.")
    assert no.answered == "denied" and not is_crisis(no.screen)  # type: ignore[attr-defined]


def test_an_admission_beside_a_yes_is_asked_about_and_never_a_plan() -> None:
    # "more than I'd like to admit, yes" answers something we never asked: we ask it.
    assert needs_check_in(Chat().say("more than I'd like to admit, yes").screen)
    # With the punctuation people end a sentence on, too (the yes at the end was once
    # read only when nothing followed it).
    for said in ("more than I'd like to admit, yes.", "Öfter, als ich zugeben würde. Ja!"):
        assert [f for f, _ in signs_in(said)] == ["admission"], said
        assert needs_check_in(Chat().say(said).screen), said
    # Without the yes it is no sign, and beside a day it is still no plan: an admission
    # is not a thought of it for the warning patterns. (The openers reader may still
    # ask; that is its own, measured read.)
    said = "I snack more than I'd like to admit, mostly on Sundays"
    assert not signs_in(said)
    assert not is_crisis(Chat().say(said).screen)  # type: ignore[attr-defined]


def test_dialysis_stopped_is_a_means_and_dialysis_ended_by_a_transplant_is_not() -> None:
    # Stopping a treatment one's life depends on is a means (conversations dev round 23);
    # the same words after a transplant are good news, and no means.
    for said in (
        "Thursday's dialysis. I'm just not going to go, or any day after.",
        "Ab Montag geh ich nicht mehr zur Dialyse.",
    ):
        assert "means" in {f for f, _ in signs_in(said)}, said
    for said in (
        "Neue Niere! Ich muss nicht mehr zur Dialyse.",
        "got the kidney, not going back to dialysis ever!",
    ):
        assert "means" not in {f for f, _ in signs_in(said)}, said
