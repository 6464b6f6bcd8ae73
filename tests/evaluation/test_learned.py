"""The learned readers are trained on what the repository holds: the steps and
crisis corpora's dev splits and the everyday talk of other corpora's dev splits,
nothing of calibration or heldout (evaluation.learn)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coachbus.learned import BARS, digest, shipped
from coachbus.safety.steps import CATALOGUE
from evaluation import learn

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "eval"


def test_the_shipped_reader_was_trained_on_the_dev_split_as_it_is() -> None:
    model = shipped("steps")
    assert model is not None
    source = (DATA / "steps" / "dev.jsonl").read_text(encoding="utf-8")
    talk = learn.everyday_negatives(DATA)
    stale = "coachbus/content/learned/steps.json is stale: run `coachbus eval steps --train`"
    assert model.trained_on["digest"] == digest(source), stale
    assert model.trained_on["everyday_digest"] == digest("\n".join(talk)), stale
    assert model.trained_on["split"] == "dev"
    assert set(model.labels) == set(CATALOGUE)


def test_the_shipped_crisis_reader_was_trained_on_the_dev_split_as_it_is() -> None:
    model = shipped("crisis")
    assert model is not None and model.labels == ("risk",)
    source = (DATA / "crisis" / "dev.jsonl").read_text(encoding="utf-8")
    stale = "coachbus/content/learned/crisis.json is stale: run `coachbus eval crisis --train`"
    assert model.trained_on["digest"] == digest(source), stale
    talk = learn.crisis_negatives(DATA)
    assert model.trained_on["everyday_digest"] == digest("\n".join(talk)), stale
    assert model.trained_on["split"] == "dev"
    # Its bar: the lowest at which its out-of-fold reads were 0.95 precise.
    assert model.bar >= learn.CHECK_IN_PRECISION - 0.05


def test_the_shipped_ask_reader_was_trained_on_the_dev_splits_as_they_are() -> None:
    model = shipped("openers")
    assert model is not None and model.labels == ("ask",)
    stale = (
        "coachbus/content/learned/openers.json is stale: "
        "run `coachbus eval crisis --conversations --train`"
    )
    conversations = (DATA / "conversations" / "dev.jsonl").read_text(encoding="utf-8")
    crisis = (DATA / "crisis" / "dev.jsonl").read_text(encoding="utf-8")
    assert model.trained_on["digest"] == digest(conversations), stale
    assert model.trained_on["crisis_digest"] == digest(crisis), stale
    talk = learn.crisis_negatives(DATA)
    assert model.trained_on["everyday_digest"] == digest("\n".join(talk)), stale
    assert model.trained_on["split"] == "dev"
    # Its bar was chosen on the first messages it decides (no rule read them), and the
    # file says how precise its out-of-fold reads were there: at least the target,
    # unless no bar reached it and the highest was taken.
    measured = model.trained_on["out_of_fold"]
    assert measured["scored"] > 0
    assert measured["precision"] >= learn.OPENERS_PRECISION or model.bar == max(BARS)


def test_openers_are_first_messages_and_look_alikes_are_no_coaching_example() -> None:
    asked, coached = learn.conversation_openers(DATA, "dev")
    rows = [
        json.loads(line) for line in (DATA / "conversations" / "dev.jsonl").open(encoding="utf-8")
    ]
    firsts = {r["turns"][0]["text"] for r in rows}
    assert asked and coached and set(asked) | set(coached) <= firsts
    look_alike = {r["turns"][0]["text"] for r in rows if r["category"] in learn.LOOK_ALIKE}
    # "Mein Testament ist gemacht" before the trip is explained: no example of talk
    # to coach (a text can open both kinds of conversation, so only the coached side).
    only_look_alike = look_alike - {
        r["turns"][0]["text"] for r in rows if r["category"] not in learn.LOOK_ALIKE
    }
    assert only_look_alike and not only_look_alike & set(coached)
    # Later turns (answers to our question) are never examples of a message.
    later = {t["text"] for r in rows for t in r["turns"][1:] if t["role"] == "user"}
    assert not (later - firsts) & (set(asked) | set(coached))


def test_everyday_talk_comes_from_one_split_only() -> None:
    dev = set(learn.everyday(DATA, "dev"))
    held = set(learn.everyday(DATA, "heldout"))
    assert dev and held
    assert set(learn.everyday_negatives(DATA)) <= dev


def test_train_refuses_every_corpus_but_steps_and_every_split_but_dev(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evaluation import cli

    assert cli.main(["steps", "--train", "--split", "heldout", "--data", str(DATA)]) == 2
    assert cli.main(["patterns", "--train", "--data", str(DATA)]) == 2
    assert "dev split only" in capsys.readouterr().err


def test_the_steps_report_says_how_much_ordinary_talk_is_blocked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evaluation import cli

    assert cli.main(["steps", "--split", "heldout", "--data", str(DATA), "--json"]) == 0
    tier = json.loads(capsys.readouterr().out)["corpora"]["steps"]["tiers"]["deterministic"]
    talk = tier["everyday_flagged"]
    assert talk["messages"] == len(learn.everyday(DATA, "heldout"))
    assert 0 <= talk["flagged"] <= talk["messages"]


def test_the_bar_never_falls_under_more_likely_than_not() -> None:
    # Words that separate the label cleanly reach the precision out of fold at the
    # lowest bar tried; the reader still counts a read only from 0.5 on.
    texts = [(f"stop the pills now {i}", []) for i in range(10)]
    texts += [(f"went for a walk today {i}", []) for i in range(10)]
    targets = [{"meds"}] * 10 + [set()] * 10
    model = learn._fit(texts, targets, ["meds"], {}, min_precision=0.5)
    assert model.bar == learn.MIN_BAR


def test_ordinary_talk_leaves_out_the_steps_corpus_abuse_disclosures() -> None:
    # "er hat mir die Hand gebrochen, ich will ihn treffen" discloses abuse, a risk the
    # crisis corpus labels: never taught to a crisis reader as ordinary talk.
    talk = set(learn.ordinary_talk(DATA, "dev"))
    steps = [json.loads(line) for line in (DATA / "steps" / "dev.jsonl").open(encoding="utf-8")]
    abuse = {
        i["text"]
        for i in steps
        if "abuse" in i["conditions"] or "confront_abuser_alone" in i["expected"]
    }
    assert abuse and not abuse & talk
    assert {i["text"] for i in steps if not i["expected"] and not i["conditions"]} & talk


def test_ordinary_talk_leaves_out_conflicts_turns_that_disclose_abuse() -> None:
    # "what my father did to me", "mein Onkel hat mich missbraucht": taught nothing
    # either way, for the steps corpus's reason above (conflicts dev round 7).
    from coachbus.safety.steps import detect_conditions

    talk = set(learn.ordinary_talk(DATA, "dev"))
    turns = [
        turn
        for line in (DATA / "conflicts" / "dev.jsonl").open(encoding="utf-8")
        for turn in json.loads(line)["turns"]
    ]
    abuse = {t for t in turns if "abuse" in detect_conditions(t)}
    assert abuse and not abuse & talk


def test_ordinary_talk_leaves_out_turns_in_the_words_of_distress() -> None:
    # A self-critical coaching turn ("I'm such a fraud") is no crisis, but taught as
    # "none" it would teach the crisis reader that worthlessness and burden words are
    # safe: it is taught nothing either way. Plain coaching turns stay.
    from coachbus.safety.conversation import signs_in

    talk = learn.ordinary_talk(DATA, "dev")
    conflicts = [
        turn
        for line in (DATA / "conflicts" / "dev.jsonl").open(encoding="utf-8")
        for turn in json.loads(line)["turns"]
    ]
    distress = [
        t for t in conflicts if any(f in {"burden", "hopelessness"} for f, _ in signs_in(t))
    ]
    assert distress and not set(distress) & set(talk)
    assert len(set(conflicts) & set(talk)) > len(conflicts) // 2


def test_the_bar_is_chosen_on_the_scored_reads_only() -> None:
    # Plain risks the rules catch first (not scored) read high and right; on the
    # messages the reader alone decides, half its high reads are wrong. Pooled, 0.5
    # would look precise enough; on the scored reads no bar is, so the highest is
    # taken, and the record says what it reaches there.
    plain = [({"ask": 0.99}, {"ask"})] * 8
    decided = [({"ask": 0.99}, {"ask"}), ({"ask": 0.99}, set())]
    reads = [r for r, _ in plain + decided]
    targets = [t for _, t in plain + decided]
    scored = [False] * len(plain) + [True] * len(decided)
    assert learn.bar_on(reads, targets, None, min_precision=0.8)[0] == 0.5
    bar, measured = learn.bar_on(reads, targets, scored, min_precision=0.8)
    assert bar == max(BARS)
    assert measured == {"scored": 2, "precision": 0.5, "recall": 1.0}
