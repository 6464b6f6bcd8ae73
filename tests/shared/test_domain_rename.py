"""A life domain was once called a "topic" on the wire and in stored state.

Records written before the rename outlive a deploy (compacted boards, results still
in flight): each must still load into the renamed models, written literally here
as the old code wrote them, with their old schema_version.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from coachbus.bus.codec import adapter_for, decode
from coachbus.contracts.events import AgentResultAdapter, ShadowResult, StabilityResult
from coachbus.contracts.payloads import DecisionSheet
from coachbus.contracts.state import BLACKBOARD_VERSION, Blackboard

pytestmark = pytest.mark.unit

MAX_BYTES = 1 << 20

# A v1 board as Shadow wrote it before the rename (field names as they were).
OLD_BOARD = b"""{
  "schema_version": 1, "user_id": "u1", "version": 7,
  "updated_at": "2026-11-30T10:00:00Z", "applied_turns": ["t6", "t7"],
  "goals": [{"goal_id": "fitness", "topic": "fitness", "text": "run three times a week",
             "quote": "I want to run three times a week", "first_seen_session": "s1",
             "sessions": ["s1", "s2"], "session_count": 2, "mentions": 3, "progress": 1,
             "setbacks": 1, "progress_turns": [4], "last_turn": 7, "evidence": []},
            {"goal_id": "goal:learn-spanish", "topic": null, "text": "learn spanish",
             "quote": "I want to learn spanish", "first_seen_session": "s2"}],
  "topics": {"fitness": {"topic": "fitness", "weight": 12.5, "mentions": 3,
                         "last_quote": "ran twice", "last_turn": 7},
             "work": {"topic": "work", "weight": 4.0, "mentions": 1}},
  "patterns": {}, "sessions": ["s1", "s2"], "session_count": 2, "turn_count": 7,
  "formality": null, "primary_pattern": null, "last_focus_goal": "fitness",
  "last_signals": ["progress"], "last_topics": ["fitness", "work"]
}"""

_ENVELOPE = {
    "schema_version": 1,
    "turn_id": "t7",
    "session_id": "s2",
    "user_id": "u1",
    "created_at": "2026-11-30T10:00:00Z",
    "tier": "deterministic",
    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "llm_calls": 0},
    "latency_ms": 3.5,
    "fallback_reason": None,
}

# A v1 ShadowResult still in flight on agent.shadow when the new Synth starts.
OLD_SHADOW = {
    **_ENVELOPE,
    "agent": "shadow",
    "payload": {
        "stated_goals": [
            {
                "goal_id": "fitness",
                "text": "run three times a week",
                "quote": "I want to run three times a week",
                "sessions_mentioned": 2,
                "first_seen_session": "s1",
                "topic": "fitness",
                "progress_reports": 1,
                "setback_reports": 1,
            }
        ],
        "actual_priorities": [{"topic": "fitness", "share": 0.75, "evidence": "ran twice"}],
        "avoided_goals": [],
        "follow_through": [],
        "patterns": [],
        "primary_pattern": None,
        "blackboard_version": 7,
        "confidence": 0.0,
        "focus_goal": "fitness",
        "signals": ["progress"],
        "message_topics": ["fitness"],
    },
}

# A v1 StabilityResult: a blocked step carried its life domain as "topic".
OLD_STABILITY = {
    **_ENVELOPE,
    "agent": "stability",
    "payload": {
        "risks": [],
        "blocked_steps": [
            {
                "step": "quitting the job abruptly",
                "reason": "losing the income is hard to undo",
                "markers": ["quit today"],
                "step_id": "quit_job_abruptly",
                "topic": "work",
                "safer_alternative": "keep the job while testing the plan",
                "confidence": 1.0,
            }
        ],
        "crisis": {"category": "none", "confidence": 0.99, "matched": [], "escalated": False},
        "overall": "moderate",
    },
}


def test_a_v1_board_with_the_old_names_loads_and_is_upgraded() -> None:
    board = Blackboard.model_validate_json(OLD_BOARD)
    assert board.schema_version == BLACKBOARD_VERSION == 2
    assert board.version == 7 and board.applied_turns == ["t6", "t7"]
    assert [g.domain for g in board.goals] == ["fitness", None]
    assert set(board.domains) == {"fitness", "work"}
    assert board.domains["fitness"].domain == "fitness"
    assert board.domains["fitness"].weight == 12.5
    assert board.last_domains == ["fitness", "work"]
    # Written back with the new names only, as v2, and read back unchanged.
    written = board.model_dump_json()
    assert '"topic' not in written and json.loads(written)["schema_version"] == 2
    assert Blackboard.model_validate_json(written) == board


def test_a_v1_board_loads_through_the_codec_too() -> None:
    board = decode(OLD_BOARD, adapter_for(Blackboard), max_bytes=MAX_BYTES)
    assert board.last_domains == ["fitness", "work"]


def test_a_v2_board_must_use_the_new_names() -> None:
    # A v2 record with the old names was not written by any build: refuse it.
    stale = json.loads(OLD_BOARD)
    stale["schema_version"] = 2
    with pytest.raises(ValidationError):
        Blackboard.model_validate(stale)


def test_a_v1_shadow_result_with_the_old_names_decodes() -> None:
    raw = json.dumps(OLD_SHADOW).encode()
    result = decode(raw, AgentResultAdapter, max_bytes=MAX_BYTES)
    assert isinstance(result, ShadowResult)
    p = result.payload
    assert p.message_domains == ["fitness"]
    assert [g.domain for g in p.stated_goals] == ["fitness"]
    assert [a.domain for a in p.actual_priorities] == ["fitness"]
    assert "topic" not in AgentResultAdapter.dump_json(result).decode()


def test_a_v1_stability_result_with_the_old_names_decodes() -> None:
    raw = json.dumps(OLD_STABILITY).encode()
    result = decode(raw, AgentResultAdapter, max_bytes=MAX_BYTES)
    assert isinstance(result, StabilityResult)
    (step,) = result.payload.blocked_steps
    assert step.domain == "work" and step.step_id == "quit_job_abruptly"


def test_a_decision_sheet_with_the_old_names_loads() -> None:
    sheet = DecisionSheet.model_validate(
        {
            "language": "en",
            "formality": "informal",
            "reading_level": "standard",
            "length": "short",
            "min_words": 20,
            "max_words": 80,
            "tone": {"warmth": 0.7, "directness": 0.5, "challenge": 0.3, "autonomy_support": 0.6},
            "strategy": "solution_focused",
            "mode": "coach",
            "crisis": {"category": "none", "confidence": 1.0, "matched": [], "escalated": False},
            "focus_goal": {"goal_id": "fitness", "topic": "fitness", "text": "run"},
            "message_topics": ["fitness"],
        }
    )
    assert sheet.focus_goal is not None and sheet.focus_goal.domain == "fitness"
    assert sheet.message_domains == ["fitness"]


def test_a_record_with_both_names_is_refused_not_guessed() -> None:
    payload = {**OLD_SHADOW["payload"], "message_domains": ["work"]}
    with pytest.raises(ValidationError, match="message_topics"):
        ShadowResult.model_validate({**OLD_SHADOW, "payload": payload})
