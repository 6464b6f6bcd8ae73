"""Synth's prompt covers every mode a DecisionSheet can carry."""

from __future__ import annotations

from typing import get_args

import pytest

from coachbus.contracts.payloads import DecisionSheet
from services.synth import prompts

pytestmark = pytest.mark.unit


def test_every_sheet_mode_has_a_situation_line() -> None:
    # A mode added to the contract without a line here would fail every LLM prose
    # call of that mode with a KeyError.
    modes = set(get_args(DecisionSheet.model_fields["mode"].annotation))
    assert modes <= set(prompts._MODE)
