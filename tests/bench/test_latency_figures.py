"""Phase G's per-turn figures (bench/latency.py): the first synthesis text and the
model's own first sentence are measured apart when Synth opens with the rendering's
sentence, each against Synth's first token."""

from __future__ import annotations

import pytest

from bench.harness import Turn
from bench.latency import Scaling, _policy_max_tokens, turn_figures
from coachbus.llm.sim import count_pieces

pytestmark = pytest.mark.unit

MODEL_SENTENCE = " It sounds like tidying feels safer than writing."


def _turn(opened: bool) -> tuple[Turn, list[dict[str, object]]]:
    turn = Turn(user="u000", text="I keep reorganising my notes (turn 7)")
    turn.message_at, turn.first_coach_at, turn.final_at = 100.0, 100.3, 104.0
    turn.final_deltas = 3
    turn.opened = opened
    # Synth asked the model at 102.0; its first token came at 102.1.
    turn.first_final_at = 102.02 if opened else 102.35
    turn.first_final_text = "A goal for your studies." if opened else MODEL_SENTENCE
    turn.first_model_final_at, turn.first_model_final_text = 102.35, MODEL_SENTENCE
    call = {
        "max_tokens": _policy_max_tokens()["synthesis_prose"],
        "user_tails": [f"... {turn.tag}"],
        "arrived": 102.0,
        "admitted": 102.0,
        "first_token": 102.1,
        "done": 103.1,
        "completion_tokens": 101,  # 10 ms a token after the first
    }
    return turn, [call]


def test_an_opened_turn_shows_text_before_the_first_token() -> None:
    turn, timeline = _turn(opened=True)
    out = turn_figures(turn, timeline, Scaling(time_scale=1.0, overhead_ms=0.0))
    assert out["opened"] is True
    assert out["first_text_beyond_synth_ttft_ms"] == pytest.approx(-80.0)
    # The model's first sentence, not the opening, is split into decode and pipeline.
    assert out["model_text_beyond_synth_ttft_ms"] == pytest.approx(250.0)
    decode = (count_pieces(MODEL_SENTENCE) - 1) * 10.0
    assert out["first_sentence_decode_ms"] == pytest.approx(decode)
    assert out["first_text_pipeline_ms"] == pytest.approx(250.0 - decode)


def test_without_the_opening_the_first_text_is_the_models_sentence() -> None:
    turn, timeline = _turn(opened=False)
    out = turn_figures(turn, timeline, Scaling(time_scale=1.0, overhead_ms=0.0))
    assert out["opened"] is False
    assert out["first_text_beyond_synth_ttft_ms"] == pytest.approx(250.0)
    assert out["model_text_beyond_synth_ttft_ms"] == pytest.approx(250.0)
