"""Synth's conflict rules (services/synth/conflicts.py): the names on the wire are
the rules of docs/mapping.md §4, and each rule records itself only when it applies."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from coachbus.contracts.payloads import CoachingStrategy, ConflictRule, SheetTone
from services.synth.conflicts import SAFE_CHALLENGE, crisis_first, safety_over_style

pytestmark = pytest.mark.unit

MAPPING = Path(__file__).resolve().parents[3] / "docs" / "mapping.md"


def test_the_rule_names_are_the_rules_of_the_mapping() -> None:
    text = MAPPING.read_text(encoding="utf-8")
    section = text[text.index("## 4. Conflict policy") : text.index("### When agents are missing")]
    documented = set(re.findall(r"^\| `(\w+)`", section, flags=re.MULTILINE))
    assert documented == set(get_args(ConflictRule))


def test_crisis_first_suspends_coaching_only_in_a_safety_mode() -> None:
    strategy = CoachingStrategy.MOTIVATIONAL_INTERVIEWING
    assert crisis_first("coach", strategy=strategy) == (False, [])
    suspended, found = crisis_first("crisis", strategy=strategy, stretch="startup")
    assert suspended
    assert [(c.winner, c.overruled, c.rule) for c in found] == [
        ("stability", "plasticity", "crisis_first"),
        ("stability", "persona", "crisis_first"),
    ]


def test_safety_over_style_caps_plasticitys_challenge_on_a_risky_turn() -> None:
    tone = SheetTone(warmth=0.5, directness=0.5, challenge=0.8, autonomy_support=0.5)
    assert safety_over_style(tone, "coach", False, from_plasticity=True) == (tone, [])
    capped, (conflict,) = safety_over_style(tone, "safety", False, from_plasticity=True)
    assert capped.challenge == SAFE_CHALLENGE and conflict.rule == "safety_over_style"
