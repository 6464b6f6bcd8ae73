"""The measured confidence tables (coachbus.safety.calibration) are what their splits
measure, and cover every outcome the message screen can give."""

from __future__ import annotations

from pathlib import Path

import pytest

from coachbus.eval import crisis as evaluation
from coachbus.eval.corpus import load
from coachbus.safety.calibration import CLEAN, UNCERTAIN, calibration
from coachbus.safety.rulebook import rulebook

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "eval"


def test_committed_calibration_is_what_the_calibration_split_measures() -> None:
    # Measured on the calibration split, which no rule is tuned on: on dev, where the
    # rules are fitted, every answer is right and the screen would claim certainty.
    items = load("crisis", evaluation.CALIBRATION_SPLIT, DATA)
    measured = evaluation.measure_calibration(evaluation.deterministic(items))
    assert calibration().confidence == measured, (
        "content/crisis/calibration.toml is stale: run `coachbus eval crisis --calibrate`"
    )


def test_every_outcome_the_screen_can_give_has_a_measured_confidence() -> None:
    # An outcome the calibration split never produced would fall back to the lowest
    # confidence in the table (the uncertain bucket's): measured, not defaulted.
    kinds = {r.kind for r in rulebook().rules}
    assert kinds | {UNCERTAIN, CLEAN} <= set(calibration().confidence)
