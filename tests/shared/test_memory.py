"""Memory stays bounded: the prompt of turn 1000 is no bigger than that of turn 100."""

from __future__ import annotations

from datetime import timedelta

import pytest

from coachbus.contracts import UserMessage
from coachbus.llm import LLMSettings, PromptBuilder
from coachbus.memory import (
    KEPT_SUMMARIES,
    RECENT_EXCHANGES,
    MemoryRecord,
    context_for,
    end_session,
    remember,
)

pytestmark = pytest.mark.unit

LINES = [
    "I want to run a half marathon in October, but this week I skipped two runs.",
    "Tomorrow I will run 5 km before work, I promise myself.",
    "Work was stressful again and I ended up on the couch. Why do I always do this?",
    "I finally did a long run on Sunday and felt proud!",
    "Ich möchte mehr schlafen, aber ich scrolle jeden Abend bis Mitternacht.",
    "My sister says I take on too much. Maybe she is right?",
]


def _message(i: int, session: str) -> UserMessage:
    msg = UserMessage.create(
        user_id="u",
        session_id=session,
        text=f"{LINES[i % len(LINES)]} (turn {i})",
        deadline_ms=1000,
        max_tokens=1,
        wall_clock_ms=1000,
        turn_id=f"t{i}",
    )
    return msg.model_copy(update={"created_at": msg.created_at + timedelta(minutes=10 * i)})


def run_history(turns: int) -> list[tuple[int, int]]:
    """(turn, prompt tokens of the coach's prompt) at checkpoints 10, 100, 1000."""
    builder = PromptBuilder(LLMSettings())
    memory: MemoryRecord | None = None
    sizes = []
    for i in range(1, turns + 1):
        message = _message(i, session=f"s{i // 8}")  # a new session every 8 turns
        if i in (10, 100, 1000):
            prompt = builder.build(context_for(memory, message), "coach", "Reply briefly.")
            sizes.append((i, prompt.tokens))
        memory = remember(memory, message, "Let us pick one small step for tomorrow.")
    return sizes


def test_prompt_size_is_flat_over_a_thousand_turns() -> None:
    sizes = dict(run_history(1000))
    print(f"\ncoach prompt tokens at turn 10/100/1000: {sizes}")
    assert sizes[1000] <= sizes[100] * 1.15
    assert sizes[100] > sizes[10]  # memory is used at all


def test_record_is_bounded_and_idempotent() -> None:
    memory: MemoryRecord | None = None
    for i in range(1, 200):
        memory = remember(memory, _message(i, f"s{i // 5}"), "ok")
    assert memory is not None
    assert len(memory.recent) <= RECENT_EXCHANGES
    assert len(memory.summaries) <= KEPT_SUMMARIES
    assert memory.long_term is not None and memory.long_term.turns > 0
    size = len(memory.model_dump_json())
    again = remember(memory, _message(199, "s39"), "ok")  # redelivered turn
    assert again.version == memory.version
    assert size < 16_000


def test_session_end_compresses_goals_and_commitments() -> None:
    memory = remember(None, _message(0, "a"), "Which day works?")
    memory = remember(memory, _message(1, "a"), "Good.")
    end_session(memory)
    summary = memory.summaries[-1]
    assert any("half marathon" in g for g in summary.goals)
    assert any("Tomorrow I will run" in c for c in summary.commitments)
    assert memory.recent == []
    context = context_for(memory, _message(2, "b"))
    assert any("half marathon" in h for h in context.history)
