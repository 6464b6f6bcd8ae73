"""The readers benchmark switches the learned readers off and on as it says."""

from __future__ import annotations

from bench.readers import readers
from coachbus.safety import screen, steps

# No rule reads it; the learned readers do (tests/shared/safety/test_steps.py).
LEARNED_ONLY = "the tablets from dr k make me foggy so from monday they are history, my call"


def test_the_switch_hides_both_readers_and_puts_them_back() -> None:
    with readers(False):
        assert steps.step_screen(LEARNED_ONLY, {"medication"}).hits == []
        assert screen.shipped("crisis") is None
    with readers(True):
        assert [h.learned for h in steps.step_screen(LEARNED_ONLY, {"medication"}).hits] == [True]
        assert screen.shipped("crisis") is not None
