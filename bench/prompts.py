"""Prompt measurements, in process: how much of a turn's parallel LLM prompts is a
shared prefix (what vLLM's prefix cache can reuse), and how prompt size evolves
over one user's history (memory must keep it flat)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench.harness import TEXTS
from coachbus.contracts import UserMessage
from coachbus.llm import LLMSettings, PromptBuilder, shared_prefix_ratio
from coachbus.llm.prompt import PromptContext
from coachbus.memory import MemoryRecord, context_for, remember

CHECKPOINTS = (10, 100, 1000)


def _message(i: int) -> UserMessage:
    msg = UserMessage.create(
        user_id="u",
        session_id=f"s{i // 8}",  # a new session every 8 turns, as in the memory test
        text=f"{TEXTS[i % len(TEXTS)]} (turn {i})",
        deadline_ms=1000,
        max_tokens=1,
        wall_clock_ms=1000,
        turn_id=f"t{i}",
    )
    return msg.model_copy(update={"created_at": msg.created_at + timedelta(minutes=10 * i)})


Instructions = Callable[[UserMessage], str]


def agent_instructions() -> dict[str, Instructions]:
    """The instructions each parallel agent sends with its LLM call, taken from the
    agents' own prompt modules; an agent without one makes no LLM call of its own."""
    found: dict[str, Instructions] = {}
    try:
        from services.coach import logic as coach_logic
        from services.coach import prompts as coach_prompts

        def coach(msg: UserMessage) -> str:
            payload = coach_logic.quick_reply(msg, None, None)
            register = coach_logic.register_for(msg, None)
            return coach_prompts.instructions(payload, register, [])

        found["coach"] = coach
    except (ImportError, AttributeError, TypeError):
        pass
    try:
        from services.shadow import prompts as shadow_prompts

        found["shadow"] = lambda _msg: shadow_prompts.instructions([])
    except (ImportError, AttributeError):
        pass
    try:
        from services.persona import prompts as persona_prompts

        found["persona"] = lambda _msg: persona_prompts.instructions([])
    except (ImportError, AttributeError):
        pass
    try:
        from coachbus.safety.model import RISK_INSTRUCTIONS
        from services.stability import prompts as stability_prompts

        found["stability.risk"] = lambda _msg: RISK_INSTRUCTIONS
        found["stability.steps"] = lambda _msg: stability_prompts.steps_instructions([])
    except (ImportError, AttributeError):
        pass
    return found


def measure(turns: int) -> dict[str, Any]:
    """Shared-prefix ratios of the parallel prompts and the Coach's prompt tokens at
    the checkpoints up to ``turns`` of one user's history."""
    builder = PromptBuilder(LLMSettings())
    sources = agent_instructions()
    memory: MemoryRecord | None = None
    points: list[dict[str, Any]] = []
    for i in range(1, turns + 1):
        message = _message(i)
        if i in CHECKPOINTS or i == turns:
            ctx: PromptContext = context_for(memory, message)
            prompts = {
                name: builder.build(ctx, name.split(".")[0], make(message))
                for name, make in sources.items()
            }
            ratios = [
                shared_prefix_ratio(a.messages, b.messages)
                for a, b in itertools.combinations(prompts.values(), 2)
            ]
            coach = prompts.get("coach") or builder.build(ctx, "coach", "Reply briefly.")
            points.append(
                {
                    "turn": i,
                    "coach_prompt_tokens": coach.tokens,
                    "prefix_tokens": coach.prefix_tokens,
                    "tokens_by_prompt": {n: p.tokens for n, p in prompts.items()},
                    "all_share_prefix": all(p.shared for p in prompts.values()),
                    "shared_prefix_ratio_min": min(ratios) if ratios else None,
                    "shared_prefix_ratio_mean": sum(ratios) / len(ratios) if ratios else None,
                }
            )
        memory = remember(memory, message, "Let us pick one small step for tomorrow.")
    return {"prompts": sorted(sources), "checkpoints": points}
