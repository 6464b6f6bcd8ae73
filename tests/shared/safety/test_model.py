"""The model tier's side of the crisis screen (coachbus.safety.model): a claim must
quote the person's own words."""

from __future__ import annotations

import pytest

from coachbus.contracts.payloads import CrisisCategory
from coachbus.normalize import NormalizedText
from coachbus.safety.model import RiskScreenCall, check_claim, quote_problems

pytestmark = pytest.mark.unit

C = CrisisCategory


def test_a_model_claim_must_quote_the_message() -> None:
    claim = RiskScreenCall(category=C.SUICIDAL_IDEATION, confidence=0.8, evidence=["x"])
    assert check_claim(claim, "I am fine") != []
    ok = claim.model_copy(update={"evidence": ["don’t want to be here"]})
    # Verbatim up to the normaliser (a typographic apostrophe in the message).
    assert check_claim(ok, "I don't want to be here anymore") == []


def test_a_normalised_message_is_checked_like_the_raw_one() -> None:
    message = "Ich möchte   NICHT mehr aufwachen."
    quotes = ["nicht mehr aufwachen", "gar nicht"]
    expected = quote_problems(quotes, message, "x")
    assert expected == ["x: quote is not in the message: 'gar nicht'"]
    assert quote_problems(quotes, NormalizedText.of(message), "x") == expected
