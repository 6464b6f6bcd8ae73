"""The LLM tiers an evaluation runs beside the rules: one way to build them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from coachbus.contracts import TurnBudget
from coachbus.llm import LLMClient, LLMSettings, Policy, Router


def candidate_router(
    base_url: str,
    small_model: str,
    strong_model: str,
    policy_file: Path | None,
    timeout_s: float,
    prompts_dir: Path | None = None,
) -> tuple[LLMSettings, LLMClient, Router]:
    """Settings, client and router for a candidate endpoint; close the client after."""
    settings = LLMSettings(
        base_url=base_url,
        small_model=small_model,
        strong_model=strong_model,
        default_timeout_s=timeout_s,
        timeouts_s={},
        prompts_dir=prompts_dir,
    )
    client = LLMClient(settings)
    return settings, client, Router(policy=Policy.load(policy_file), client=client)


def item_budget(timeout_s: float, max_tokens: int = 4_000) -> TurnBudget:
    """One item's budget: room for the policy's repair loop, never for ever."""
    return TurnBudget(
        max_tokens=max_tokens, deadline_at=datetime.now(UTC) + timedelta(seconds=timeout_s * 3)
    )


__all__ = ["candidate_router", "item_budget"]
