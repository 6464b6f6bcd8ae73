"""The measured confidence table (coachbus.safety.calibration) covers every outcome the
message screen can give (that it is what its split measures: tests/evaluation/test_crisis.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coachbus.safety.calibration import CLEAN, UNCERTAIN, calibration
from coachbus.safety.rulebook import rulebook

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "eval"


def test_every_outcome_the_screen_can_give_has_a_measured_confidence() -> None:
    # An outcome the calibration split never produced would fall back to the lowest
    # confidence in the table (the uncertain bucket's): measured, not defaulted.
    kinds = {r.kind for r in rulebook().rules}
    assert kinds | {UNCERTAIN, CLEAN} <= set(calibration().confidence)
