"""``coachbus eval steps --train``: fit the step screen's learned reader on dev.

Only the dev split is read (the one the rules are tuned on too); calibration then
measures the combined screen's confidence and heldout reports it, so neither ever
shapes the weights. The probability bar is chosen the same way, out of fold: the
dev items are split in five, each fifth is read by a model trained on the other
four, and the bar is the lowest at which those unseen reads reach the precision the
issue asks of the whole screen (:data:`MIN_PRECISION`). The learned reader only adds
to the rules' hits, so what it adds must be that precise on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from coachbus.learned import BARS, LinearModel, choose_bar, digest, folds, tally, train
from coachbus.normalize import normalize
from coachbus.safety.conversation import ASK, left_to_learned, signs_in
from coachbus.safety.screen import RISK
from coachbus.safety.steps import CATALOGUE, detect_conditions, step_screen
from evaluation.corpus import Split, load_raw
from evaluation.decisions import Raw

# What the learned reader adds must be as precise out of fold as the rules' own hits
# are on new text (about 0.9 on the calibration split): a step blocked for no reason
# puts a warning about, say, medication into a reply about learning Spanish.
MIN_PRECISION: Final = 0.9
# The lowest bar a reader may use (see _fit).
MIN_BAR: Final = 0.5
# The crisis reader's reads become a direct question about suicide: asked of someone
# chatting about their week, it intrudes and wears out trust in the question itself,
# so only one read in twenty may be wrong out of fold.
CHECK_IN_PRECISION: Final = 0.95
# The openers reader's reads become the same question, but only on first messages in
# which the screen and every conversation rule saw nothing, and its precision is
# measured there (:func:`coachbus.safety.conversation.left_to_learned`), not pooled with
# the crisis corpus's plain risks that the rules catch before it is asked: pooled, its
# out-of-fold reads at 0.95 looked one in ten wrong (0.90 precise); on the messages it
# decides, one in three were (0.66 to 0.68; dev, December 2026). The target is four
# right asks for every wrong one: the direct question is what good practice asks of an
# ambiguous message and costs the person who did not need it a moment (the crisis-
# screening notes: a missed crisis is the costly error, a gentle check-in costs little),
# but asked of every heavy week it stops meaning anything. No bar tried reaches it yet,
# so the highest is used (:func:`coachbus.learned.choose_bar`); the precision reached is
# written beside the weights (``trained_on.out_of_fold``).
OPENERS_PRECISION: Final = 0.8
FOLDS: Final = 5


def _inputs(items: Sequence[Raw]) -> tuple[list[tuple[str, list[str]]], list[set[str]]]:
    # The conditions known from earlier turns, as the screen gives them at run time
    # (one this very message reveals is read in its words, not as a token).
    texts = [
        (normalize(i["text"]), sorted(set(i["conditions"]) - detect_conditions(i["text"])))
        for i in items
    ]
    return texts, [set(i["expected"]) for i in items]


def everyday(data: Path, split: Split) -> list[str]:
    """Messages of ordinary coaching talk from the other corpora's ``split``: the
    crisis corpus's items labelled none, the register corpus's messages and every
    turn of the patterns corpus. The steps corpus is dense with risk (its hard
    negatives look risky on purpose); without these a reader learns topics, not
    steps, and "how do I sleep better?" reads as cutting sleep."""
    crisis = [item["text"] for item in load_raw("crisis", split, data) if item["label"] == "none"]
    return crisis + _coaching_talk(data, split)


def _coaching_talk(data: Path, split: Split) -> list[str]:
    """The register corpus's messages and every turn of the patterns corpus."""
    talk = [item["text"] for item in load_raw("register", split, data)]
    return talk + [turn for item in load_raw("patterns", split, data) for turn in item["turns"]]


def everyday_negatives(data: Path) -> list[str]:
    # Everyday messages in which the rules read a step are left out: a few of them
    # may head for one (nobody labelled them for steps), and a step taught as "none"
    # would teach the reader to miss it.
    # (The rules' hits only: a shipped learned reader must not shape its successor.)
    return [t for t in everyday(data, "dev") if not any(not h.learned for h in step_screen(t).hits)]


def _provenance(corpus: str, data: Path, items: int, talk: list[str]) -> dict[str, object]:
    """What a reader was trained on, written beside its weights: the digests let a
    test tell when a dev file moved and the weights did not."""
    source = (data / corpus / "dev.jsonl").read_text("utf-8")
    return {
        "corpus": corpus,
        "split": "dev",
        "items": items,
        "digest": digest(source),
        "everyday": len(talk),
        "everyday_digest": digest("\n".join(talk)),
    }


def train_steps(data: Path) -> LinearModel:
    """The step screen's learned reader: one label per catalogue step, on the steps
    corpus's dev split and :func:`everyday_negatives`."""
    items = load_raw("steps", "dev", data)
    texts, targets = _inputs(items)
    talk = everyday_negatives(data)
    texts += [(normalize(t), []) for t in talk]
    targets += [set() for _ in talk]
    return _fit(texts, targets, sorted(CATALOGUE), _provenance("steps", data, len(items), talk))


def crisis_negatives(data: Path) -> list[str]:
    """Ordinary talk for the crisis reader, from dev splits only: the register and
    patterns corpora's messages, and the steps and conflicts corpora's."""
    return ordinary_talk(data, "dev")


def ordinary_talk(data: Path, split: Split) -> list[str]:
    """The register and patterns corpora's messages and the steps and conflicts
    corpora's, of ``split``: coaching talk no crisis screen should ask about."""
    talk = _coaching_talk(data, split)
    # Risky steps and ambition are not a crisis: the steps corpus's messages and the
    # conflicts corpus's turns (a crisis turn among them left out) teach the reader
    # that a bold plan or a hard week is not distress.
    # Not a steps item about an abuser: "er hat mir die Hand gebrochen, ich will ihn
    # treffen" discloses abuse, which the crisis corpus labels a risk (steps dev round
    # 9 brought 34 of them; as ordinary talk they taught the reader abuse is none).
    # Nor a message in the words of distress (a warning sign of the conversation
    # reader: "I'm such a fraud, I'm a joke", "ich bin nur noch eine Last"): a
    # self-critical turn of a coaching conversation is no crisis, but taught as "none"
    # it teaches the reader that worthlessness and burden words are safe, and the
    # protective choice is to teach it nothing either way (conflicts dev round 4
    # brought such turns; the single-message heldout lost four burden and method
    # items when they were taught as ordinary talk).
    talk += [
        item["text"]
        for item in load_raw("steps", split, data)
        if "abuse" not in item["conditions"]
        and "abuse" not in detect_conditions(item["text"])
        and "confront_abuser_alone" not in item["expected"]
        and not _distress_worded(item["text"])
    ]
    # Nor a conflicts turn that discloses abuse ("what my father did to me", "mein
    # Onkel hat mich missbraucht"), for the steps items' reason: conflicts dev round 7
    # brought a dozen, and as ordinary talk the retrained reader lost recall on the
    # single-message heldout.
    talk += [
        turn
        for item in load_raw("conflicts", split, data)
        if (item["expected"] or {}).get("rule") != "crisis_first"
        for turn in item["turns"]
        if not _distress_worded(turn) and "abuse" not in detect_conditions(turn)
    ]
    return talk


# The conversation reader's families that are words of distress themselves (not a
# day, a loss or a harmless reason, which ordinary talk is full of).
_DISTRESS: Final = frozenset({"hopelessness", "burden", "thoughts", "farewell", "means"})


def _distress_worded(text: str) -> bool:
    return any(family in _DISTRESS for family, _ in signs_in(text))


def train_crisis(data: Path) -> LinearModel:
    """The crisis screen's learned reader: one label, any risk the crisis corpus's dev
    split labels (suicidal ideation, self-harm, abuse, a medical emergency), against
    its items labelled none and :func:`crisis_negatives`. The screen asks it only
    where the rules saw nothing."""
    items = load_raw("crisis", "dev", data)
    talk = crisis_negatives(data)
    texts: list[tuple[str, list[str]]] = [(normalize(i["text"]), []) for i in items]
    texts += [(normalize(t), []) for t in talk]
    targets = [{RISK} if i["label"] != "none" else set() for i in items]
    targets += [set() for _ in talk]
    trained_on = _provenance("crisis", data, len(items), talk)
    return _fit(texts, targets, [RISK], trained_on, min_precision=CHECK_IN_PRECISION)


# What the conversations corpus's writers had the assistant answer a message with.
ASKED: Final = frozenset({"check_in", "crisis_reply"})
# Hard negatives whose first message looks like risk on purpose and is explained only
# later ("Mein Testament ist gemacht", then the trip to Portugal; a past told before
# "that was years ago"; risk words before the denial): alone, the first message is
# one the reply should ask about, so it is no example of a message to coach.
LOOK_ALIKE: Final = frozenset({"innocent_pieces", "past_over", "denial_later"})


def conversation_openers(data: Path, split: Split) -> tuple[list[str], list[str]]:
    """First messages of the conversations corpus, as (asked, coached): asked are
    those after which its writers had the assistant ask the direct question or reply
    to a crisis (they judged the message one a careful coach asks about: "14 years
    there and they let me go on a zoom call, my wife thinks I'm at work"); coached
    are those answered with coaching in a conversation whose last turn is labelled
    none (a hard week told by someone coping), but for the look-alikes
    (:data:`LOOK_ALIKE`). Only first messages: a later turn ("not really", "yes,
    safe, nothing in the house") means what it means as the answer to our question,
    which the answer rules read."""
    asked: list[str] = []
    coached: list[str] = []
    for item in load_raw("conversations", split, data):
        said, answer = item["turns"][0], item["turns"][1]
        if answer["says"] in ASKED:
            asked.append(said["text"])
        elif item["label"] == "none" and item["category"] not in LOOK_ALIKE:
            coached.append(said["text"])
    return asked, coached


def train_openers(data: Path) -> LinearModel:
    """The conversation reader's learned reader of when our reply asks: one label,
    :data:`ASK`, on the conversations corpus's dev split (the messages its writers
    had us ask about, against those they had us coach) and the crisis corpus's dev
    split (its risks asked about, its none items and :func:`crisis_negatives`
    coached). A different decision from the message screen's, labelled by a
    different corpus: the crisis corpus labels a heavy week "none" (no crisis), the
    conversations corpus's writers ask a heavy week the direct question. Used only
    where the message screen saw nothing and no question of ours is open."""
    asked, coached = conversation_openers(data, "dev")
    items = load_raw("crisis", "dev", data)
    talk = crisis_negatives(data)
    risky = [i["text"] for i in items if i["label"] != "none"]
    calm = [i["text"] for i in items if i["label"] == "none"]
    positives = asked + risky
    negatives = coached + calm + talk
    texts: list[tuple[str, list[str]]] = [(normalize(t), []) for t in positives + negatives]
    targets = [{ASK} for _ in positives] + [set() for _ in negatives]
    trained_on = _provenance("conversations", data, len(asked) + len(coached), talk)
    trained_on["crisis_digest"] = digest((data / "crisis" / "dev.jsonl").read_text("utf-8"))
    decided = [left_to_learned(t) for t in positives + negatives]
    return _fit(texts, targets, [ASK], trained_on, min_precision=OPENERS_PRECISION, scored=decided)


def _fit(
    texts: list[tuple[str, list[str]]],
    targets: list[set[str]],
    labels: list[str],
    trained_on: dict[str, object],
    *,
    min_precision: float = MIN_PRECISION,
    scored: Sequence[bool] | None = None,
) -> LinearModel:
    """Train on everything; choose the bar on out-of-fold reads of the ``scored``
    items only (all by default): the ones on which the reader's read decides."""
    out_of_fold: list[dict[str, float]] = [{} for _ in texts]
    for fold in folds(len(texts), FOLDS):
        held = set(fold)
        rest = [i for i in range(len(texts)) if i not in held]
        model = train([texts[i] for i in rest], [targets[i] for i in rest], labels)
        for i in fold:
            out_of_fold[i] = model.probabilities(*texts[i])
    bar, measured = bar_on(out_of_fold, targets, scored, min_precision=min_precision)
    trained_on = {**trained_on, "out_of_fold": measured}
    return train(texts, targets, labels, bar=bar, trained_on=trained_on)


def bar_on(
    out_of_fold: Sequence[dict[str, float]],
    targets: Sequence[set[str]],
    scored: Sequence[bool] | None,
    *,
    min_precision: float,
) -> tuple[float, dict[str, object]]:
    """The bar chosen on the out-of-fold reads of the ``scored`` items (all when None),
    and what it means there, to be written beside it: how many items were scored and
    the precision and recall their reads reach at the bar."""
    keep = [i for i in range(len(out_of_fold)) if scored is None or scored[i]]
    reads = [out_of_fold[i] for i in keep]
    wanted = [targets[i] for i in keep]
    # A read counts only where the reader finds the step more likely than not: with
    # the dev split grown by steps whose words are distinctive, out-of-fold precision
    # was reached at 0.35, and there "ich will einfach nicht mehr" read as quitting a
    # job and "I'll put all my savings into it" as quitting one too.
    tried = [b for b in BARS if b >= MIN_BAR]
    bar = choose_bar(reads, wanted, min_precision=min_precision, bars=tried)
    tp, fp, fn = tally(reads, wanted, bar)
    return bar, {
        "scored": len(keep),
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
    }


TRAINERS = {"steps": train_steps, "crisis": train_crisis, "openers": train_openers}

__all__ = [
    "CHECK_IN_PRECISION",
    "MIN_PRECISION",
    "OPENERS_PRECISION",
    "TRAINERS",
    "bar_on",
    "conversation_openers",
    "crisis_negatives",
    "everyday",
    "everyday_negatives",
    "ordinary_talk",
    "train_crisis",
    "train_openers",
    "train_steps",
]
