"""BFI-10 item scoring and trait derivation."""

from __future__ import annotations

import pytest

from coachbus import ocean
from coachbus.contracts.payloads import Trait
from coachbus.contracts.state import ItemEvidence

pytestmark = pytest.mark.unit


def test_no_evidence_is_exactly_average_with_zero_confidence() -> None:
    traits = ocean.derive_traits({})
    assert all(t.value == 0.5 and t.confidence == 0.0 for t in traits.values())


def test_reversed_item_lowers_its_trait() -> None:
    items: dict[int, ItemEvidence] = {}
    ocean.apply_cues(items, ocean.score_items("I'm so lazy, I did nothing all weekend."))
    assert ocean.derive_traits(items)[Trait.CONSCIENTIOUSNESS].value < 0.5


def test_agreeing_item_raises_its_trait() -> None:
    items: dict[int, ItemEvidence] = {}
    ocean.apply_cues(items, ocean.score_items("I planned the week in my calendar, step by step."))
    assert ocean.derive_traits(items)[Trait.CONSCIENTIOUSNESS].value > 0.5


def test_negated_cue_counts_as_disagreement_not_agreement() -> None:
    cues = ocean.score_items("I'm not worried at all.")
    assert [(c.item, c.direction) for c in cues] == [(9, -1)]


def test_confidence_rises_with_evidence_and_saturates_below_cap() -> None:
    values = [ocean.confidence(n) for n in (0, 1, 3, 10, 100, 10_000)]
    assert values == sorted(values)
    assert values[0] == 0.0
    assert values[-1] <= ocean.CONFIDENCE_CAP < 1.0


def test_one_phrase_cannot_swing_an_item_to_the_extreme() -> None:
    ev = ItemEvidence(agree=1.0, count=1)
    assert 3.0 < ocean.item_score(ev) < 4.0


def test_shrunk_pulls_uncertain_traits_to_the_midpoint() -> None:
    traits = ocean.derive_traits({8: ItemEvidence(agree=1.0, count=1)})
    c = traits[Trait.CONSCIENTIOUSNESS]
    assert 0.5 < ocean.shrunk(c) < c.value


def test_decay_fades_scores_but_keeps_counts() -> None:
    items = {9: ItemEvidence(agree=4.0, count=4)}
    ocean.decay(items, 0.5)
    assert items[9].agree == 2.0
    assert items[9].count == 4
