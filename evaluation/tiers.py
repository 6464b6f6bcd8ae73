"""The tiers an evaluation runs, one runner each: the rules alone, item by item, and
the policy's LLM tiers on a candidate endpoint, a few items at a time, as the
services run them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from coachbus.contracts import TurnBudget
from coachbus.llm import LLMClient, LLMSettings, Policy, PromptBuilder, Router
from coachbus.llm.router import Outcome
from evaluation.results import Answer, Report

ItemT = TypeVar("ItemT")
AnswerT = TypeVar("AnswerT", bound=Answer[Any])


@dataclass(frozen=True, slots=True)
class Candidate:
    """An OpenAI-compatible endpoint and how to run a decision's LLM tiers on it
    (``coachbus eval --llm-base-url`` and the flags beside it)."""

    base_url: str
    small_model: str
    strong_model: str
    policy_file: Path | None = None
    timeout_s: float = 60.0
    prompts_dir: Path | None = None  # instruction overrides, <decision kind>.txt
    concurrency: int = 4  # items scored at once

    def settings(self) -> LLMSettings:
        return LLMSettings(
            base_url=self.base_url,
            small_model=self.small_model,
            strong_model=self.strong_model,
            default_timeout_s=self.timeout_s,
            timeouts_s={},
            prompts_dir=self.prompts_dir,
        )


@dataclass(frozen=True, slots=True)
class RouterTier:
    """What one decision on the candidate is taken with."""

    candidate: Candidate
    router: Router
    prompts: PromptBuilder

    def budget(self, max_tokens: int = 4_000) -> TurnBudget:
        """One decision's budget: room for the policy's repair loop, never for ever."""
        return TurnBudget(
            max_tokens=max_tokens,
            deadline_at=datetime.now(UTC) + timedelta(seconds=self.candidate.timeout_s * 3),
        )


def spent(out: Outcome[Any]) -> dict[str, Any]:
    """The tier that carried a routed decision, its tokens and its stop reason, as
    :class:`Answer` fields."""
    return {
        "tier": out.tier,
        "tokens": out.usage.prompt_tokens + out.usage.completion_tokens,
        "stop_reason": out.stop_reason.value if out.stop_reason else None,
    }


def run_rules(items: Sequence[ItemT], answer: Callable[[int, ItemT], AnswerT]) -> Report[AnswerT]:
    """The deterministic tier: ``answer(n, item)`` for every item, each timed."""
    answers: list[AnswerT] = []
    for n, item in enumerate(items):
        started = time.perf_counter()
        a = answer(n, item)
        answers.append(replace(a, latency_s=time.perf_counter() - started))
    return Report("deterministic", answers)


async def run_router(
    candidate: Candidate,
    items: Sequence[ItemT],
    decide: Callable[[RouterTier, int, ItemT], Awaitable[AnswerT]],
) -> Report[AnswerT]:
    """The router's tiers on the candidate: ``decide(tier, n, item)`` for every item,
    ``candidate.concurrency`` at a time, each timed from when it got its turn."""
    settings = candidate.settings()
    client = LLMClient(settings)
    tier = RouterTier(
        candidate,
        Router(policy=Policy.load(candidate.policy_file), client=client),
        PromptBuilder(settings),
    )
    gate = asyncio.Semaphore(candidate.concurrency)

    async def one(n: int, item: ItemT) -> AnswerT:
        async with gate:
            started = time.perf_counter()
            a = await decide(tier, n, item)
            return replace(a, latency_s=time.perf_counter() - started)

    try:
        answers = list(await asyncio.gather(*(one(n, i) for n, i in enumerate(items))))
    finally:
        await client.aclose()
    return Report("router", answers)


__all__ = ["Candidate", "RouterTier", "run_router", "run_rules", "spent"]
