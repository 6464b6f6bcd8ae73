"""Hot-path guard: the deterministic tier stays linear in message length."""

from __future__ import annotations

import time

import pytest

from services.coach.logic import quick_reply
from services.persona.logic import observe as persona_observe
from services.plasticity.logic import plan
from services.shadow.logic import observe as shadow_observe
from services.stability.logic import assess
from services.synth.logic import synthesize
from tests.fixtures.agents import msg
from tests.fixtures.replay import results_for

pytestmark = pytest.mark.unit

_SENTENCE = (
    "I want to run three times a week but I didn't run, I scrolled on my phone instead "
    "and it has to be perfect. "
)


def _all_six(text: str) -> float:
    m = msg(text)
    best = float("inf")
    for _ in range(3):  # best of three: robust against a noisy machine
        start = time.perf_counter()
        board, sp = shadow_observe(None, m)
        profile, pp = persona_observe(None, board, m)
        pl = plan(profile, m)
        safety, st = assess(None, board, m)
        c = quick_reply(m, board, safety)
        results = results_for(
            m, shadow_p=sp, persona_p=pp, plasticity_p=pl, stability_p=st, coach_p=c
        )
        synthesize(m, results, [])
        best = min(best, time.perf_counter() - start)
    return best


def test_cost_grows_linearly_with_message_length() -> None:
    small = _all_six(_SENTENCE * 4)
    large = _all_six(_SENTENCE * 40)  # ten times longer (~4,000 characters)
    assert large < 25 * small, (small, large)
    assert large < 2.0  # seconds, for all six agents together, even on a slow runner
