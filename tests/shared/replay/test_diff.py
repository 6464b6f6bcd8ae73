"""Judging a replay (coachbus.replay.diff): what changed on a turn, the guard that
fails a run, and the report marking the replies' differences."""

from __future__ import annotations

import pytest

from coachbus.replay.diff import guard, render_html, totals, turn_diff
from coachbus.replay.record import assemble
from tests.fixtures.recording import recording

pytestmark = pytest.mark.unit


def test_guard_names_missed_crises_and_leaks() -> None:
    turns = [
        {"turn_id": "a", "crisis": {"missed": True}, "leaked_steps": []},
        {"turn_id": "b", "crisis": {"missed": False}, "leaked_steps": ["all_savings"]},
        {"turn_id": "c", "crisis": {"missed": False}, "leaked_steps": []},
    ]
    assert guard(turns) == {"missed_crisis": ["a"], "leaked_steps": ["b"]}


def test_a_crisis_the_candidate_misses_is_flagged_and_reported() -> None:
    crisis_turn = assemble(recording("ann"))[2]
    calm = {"payload": {"crisis": {"category": "none", "uncertain": False}, "blocked_steps": []}}
    final = {"turn_id": "new", "kind": "final", "text": "ok a walk sounds good"}
    turn = turn_diff(crisis_turn, {"stability": calm}, final, 0.25)
    assert turn["crisis"]["missed"] and turn["crisis"]["changed"]
    assert turn["final"]["changed"] and turn["answered"]
    assert turn["decisions_changed"] == {"stability": ["crisis"]}
    report = {"turns": [turn], "totals": totals([turn])}
    assert report["totals"]["crisis_missed"] == 1
    html = render_html(report)
    assert "MISSED CRISIS" in html
    assert "<td>ok <ins>a walk sounds good</ins></td>" in html
