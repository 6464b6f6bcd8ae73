"""The learned reader's linear model (coachbus.learned): features, training,
the file it is shipped in, and the out-of-fold bar."""

from __future__ import annotations

import math

import pytest

from coachbus.learned import NORM_FLOOR, LinearModel, choose_bar, folds, grams, tally, train

pytestmark = pytest.mark.unit

# Two made-up labels on toy sentences: "pills" heads for one, "quit" for the other.
TOY = [
    ("stop the pills tomorrow", {"meds"}),
    ("no more pills for me", {"meds"}),
    ("the pills can go, i decided", {"meds"}),
    ("i quit my job on friday", {"job"}),
    ("quit the job, no plan", {"job"}),
    ("gonna quit work tomorrow", {"job"}),
    ("went for a walk in the park", set()),
    ("cooked dinner for friends", set()),
    ("read two chapters tonight", set()),
    ("ran five k this morning", set()),
    ("slept well, feeling good", set()),
    ("called my sister today", set()),
]


def _model() -> LinearModel:
    return train([(t, []) for t, _ in TOY], [y for _, y in TOY], ["job", "meds"], epochs=30)


def test_grams_are_word_bounded_and_carry_extra_tokens() -> None:
    counts = grams("quit it", ["injury"])
    assert " qu" in counts and "it " in counts and " it " in counts
    assert "t i" not in counts  # n-grams never cross a word boundary
    assert counts["#injury"] == 1


def test_training_separates_the_labels_and_is_the_same_every_time() -> None:
    model = _model()
    meds = model.probabilities("those pills are going in the bin")
    job = model.probabilities("i will quit that job")
    assert meds["meds"] > 0.5 > meds["job"]
    assert job["job"] > 0.5 > job["meds"]
    assert _model().to_json() == model.to_json()


def test_a_message_without_evidence_reads_as_the_base_rate() -> None:
    # The intercept is the label's prior (3 of 12, Laplace-smoothed), not fitted.
    model = _model()
    prior = 1 / (1 + math.exp(-model.bias["meds"]))
    assert prior == pytest.approx(4 / 14)  # odds (3 + 1) / (9 + 1)
    assert model.probabilities("")["meds"] == pytest.approx(prior)
    assert model.lift("meds", prior) == pytest.approx(0.0)


def test_a_short_message_is_not_scaled_up_to_a_sentence() -> None:
    # Below the floor, a message's vector keeps its own (small) length.
    model = _model()
    short = model.probabilities("pills")["meds"]
    assert NORM_FLOOR > 0
    assert short < model.probabilities("stop the pills, no more pills")["meds"]


def test_the_file_reads_back_to_the_same_probabilities() -> None:
    model = _model()
    back = LinearModel.from_json(model.to_json())
    for text in ("stop the pills", "quit the job", "ok"):
        for label, p in model.probabilities(text).items():
            assert back.probabilities(text)[label] == pytest.approx(p, abs=1e-3)
    assert back.labels == model.labels and back.bar == model.bar


def test_evidence_names_the_pieces_that_weighed_most() -> None:
    pieces = _model().evidence("stop the pills", "meds")
    assert pieces and all("pil" in p or "ill" in p or "pills" in p for p in pieces[:1])
    assert len(pieces) == len(set(pieces))


def test_folds_cover_every_item_once() -> None:
    parts = folds(23, 5)
    assert sorted(i for part in parts for i in part) == list(range(23))
    assert folds(23, 5) == parts


def test_the_bar_is_the_lowest_that_reaches_the_precision() -> None:
    probs = [{"a": 0.9}, {"a": 0.6}, {"a": 0.45}, {"a": 0.4}]
    targets = [{"a"}, {"a"}, set(), {"a"}]
    bars = (0.4, 0.45, 0.5)
    # 0.4: 3 right of 4 (0.75); 0.45: 2 of 3; 0.5: 2 of 2.
    assert choose_bar(probs, targets, min_precision=0.75, bars=bars) == 0.4
    assert choose_bar(probs, targets, min_precision=0.9, bars=bars) == 0.5
    # None reaches it: the highest bar.
    assert choose_bar([{"a": 0.99}], [set()], min_precision=0.5) == 0.95


def test_tally_counts_the_reads_at_a_bar() -> None:
    probs = [{"a": 0.9, "b": 0.2}, {"a": 0.6, "b": 0.7}, {"a": 0.1, "b": 0.1}]
    targets = [{"a"}, {"b"}, {"a"}]
    assert tally(probs, targets, 0.5) == (2, 1, 1)
    assert tally(probs, targets, 0.8) == (1, 0, 2)
