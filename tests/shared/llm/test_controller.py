"""The repair-loop controller: each stop condition, with its fallback and counters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from coachbus.contracts import TurnBudget, Usage
from coachbus.llm import (
    Budget,
    ChatResult,
    Controller,
    Generation,
    LLMHTTPError,
    OutputError,
    RepairContext,
    StopReason,
    error_signature,
)
from coachbus.metrics import REGISTRY

pytestmark = pytest.mark.unit

FALLBACK = "deterministic answer"


def budget(tokens: int = 10_000, seconds: float = 30.0) -> Budget:
    return Budget(
        TurnBudget(max_tokens=tokens, deadline_at=datetime.now(UTC) + timedelta(seconds=seconds))
    )


def scripted(
    outputs: Sequence[tuple[str, int]],
) -> tuple[Callable[[RepairContext], object], list[RepairContext]]:
    """A generator returning the given (output, tokens) per attempt; records contexts."""
    seen: list[RepairContext] = []

    async def generate(ctx: RepairContext) -> Generation[str]:
        seen.append(ctx)
        text, tokens = outputs[ctx.attempt - 1]
        return Generation(
            value=text,
            usage=Usage(prompt_tokens=tokens, completion_tokens=0, llm_calls=1),
            output=text,
        )

    return generate, seen


def errors_by_output(table: dict[str, list[str]]) -> Callable[[str], list[str]]:
    return lambda value: table.get(value, [])


def stops(decision: str, reason: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "coachbus_repair_stops_total", {"decision": decision, "reason": reason}
        )
        or 0.0
    )


async def run(
    decision: str,
    outputs: Sequence[tuple[str, int]],
    table: dict[str, list[str]],
    b: Budget | None = None,
    **kw: int,
) -> tuple[object, list[RepairContext]]:
    generate, seen = scripted(outputs)
    outcome = await Controller(decision, **kw).run(
        generate=generate,  # type: ignore[arg-type]
        evaluate=errors_by_output(table),
        fallback=lambda: FALLBACK,
        budget=b or budget(),
    )
    return outcome, seen


async def test_success_after_a_repair_passes_the_errors_back() -> None:
    before = stops("t-success", "success")
    outcome, seen = await run(
        "t-success", [("bad", 10), ("good", 10)], {"bad": ["score: too high"]}
    )
    assert outcome.success
    assert outcome.value == "good"
    assert outcome.stop_reason is StopReason.SUCCESS
    assert outcome.fallback_reason is None
    assert seen[1].previous_errors == ["score: too high"]
    assert seen[1].previous_output == "bad"
    assert outcome.usage.prompt_tokens == 20  # type: ignore[attr-defined]
    assert stops("t-success", "success") == before + 1


async def test_cap_reached_falls_back() -> None:
    table = {"a": ["e1", "e2", "e3", "e4"], "b": ["f1", "f2", "f3"], "c": ["g1", "g2"]}
    outcome, _ = await run("t-cap", [("a", 5), ("b", 5), ("c", 5)], table, max_attempts=3)
    assert outcome.stop_reason is StopReason.CAP  # type: ignore[attr-defined]
    assert outcome.value == FALLBACK
    assert outcome.fallback_reason == "cap"
    assert outcome.attempts == 3  # type: ignore[attr-defined]
    assert stops("t-cap", "cap") == 1


async def test_token_budget_spent_stops_before_an_unaffordable_attempt() -> None:
    b = budget(tokens=250)
    table = {"a": ["e1", "e2", "e3"], "b": ["f1", "f2"], "c": ["g1"]}
    outcome, seen = await run(
        "t-tokens", [("a", 100), ("b", 100), ("c", 100)], table, b, max_attempts=5
    )
    assert outcome.stop_reason is StopReason.BUDGET_TOKENS  # type: ignore[attr-defined]
    assert len(seen) == 2  # a third 100-token attempt would overrun the 50 left
    assert outcome.value == FALLBACK
    assert b.spent_tokens == 200


async def test_a_spent_budget_cannot_be_refilled_by_a_redelivery() -> None:
    turn = TurnBudget(max_tokens=100, deadline_at=datetime.now(UTC) + timedelta(seconds=30))
    # The agent persisted what it spent; a redelivered message resumes the ledger.
    resumed = Budget(turn, spent_tokens=100)
    outcome, seen = await run("t-redeliver", [("a", 10)], {}, resumed)
    assert outcome.stop_reason is StopReason.BUDGET_TOKENS
    assert not seen
    expired = Budget(
        TurnBudget(max_tokens=100, deadline_at=datetime.now(UTC) - timedelta(seconds=1))
    )
    outcome, seen = await run("t-redeliver", [("a", 10)], {}, expired)
    assert outcome.stop_reason is StopReason.BUDGET_TIME
    assert not seen


async def test_wall_clock_budget_interrupts_a_slow_generation() -> None:
    async def slow(ctx: RepairContext) -> Generation[str]:
        await asyncio.sleep(5)
        return Generation(value="late")

    outcome = await Controller("t-time").run(
        generate=slow, evaluate=lambda v: [], fallback=lambda: FALLBACK, budget=budget(seconds=0.15)
    )
    assert outcome.stop_reason is StopReason.BUDGET_TIME
    assert outcome.value == FALLBACK


async def test_same_error_signature_again_is_oscillation() -> None:
    # Different numbers, same error: normalised to one signature.
    table = {"a": ["items.3.score: 7 > 5"], "b": ["items.4.score: 9 > 5"]}
    outcome, seen = await run(
        "t-osc", [("a", 5), ("b", 5), ("c", 5)], table, max_attempts=5, patience=3
    )
    assert outcome.stop_reason is StopReason.OSCILLATION  # type: ignore[attr-defined]
    assert len(seen) == 2
    assert error_signature(table["a"]) == error_signature(table["b"])


async def test_two_alternating_outputs_are_oscillation() -> None:
    # A, B, A with a fresh error text every time: only the outputs repeat.
    generate, seen = scripted([("A", 1), ("B", 1), ("A", 1), ("B", 1)])
    texts = iter(["alpha wrong", "beta wrong", "gamma wrong", "delta wrong"])
    outcome = await Controller("t-alt", max_attempts=5, patience=5).run(
        generate=generate,  # type: ignore[arg-type]
        evaluate=lambda v: [next(texts)],
        fallback=lambda: FALLBACK,
        budget=budget(),
    )
    assert outcome.stop_reason is StopReason.OSCILLATION
    assert len(seen) == 3
    assert len({h.signature for h in outcome.history}) == 3


async def test_no_improvement_stops() -> None:
    table = {"a": ["e1"], "b": ["f1"], "c": ["g1"]}
    outcome, seen = await run(
        "t-flat", [("a", 5), ("b", 5), ("c", 5)], table, max_attempts=5, patience=2
    )
    assert outcome.stop_reason is StopReason.NO_IMPROVEMENT  # type: ignore[attr-defined]
    assert len(seen) == 3
    assert outcome.fallback_reason == "no_improvement"


async def test_llm_error_stops_with_error_and_output_errors_are_repaired() -> None:
    calls = 0

    async def generate(ctx: RepairContext) -> Generation[str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            spent = Usage(prompt_tokens=30, completion_tokens=3, llm_calls=1)
            result = ChatResult(
                text='{"a": ', parsed=None, usage=spent, latency_s=0.1, ttft_s=0.05,
                finish_reason="length", model="m", tier="small", agent="x",
            )  # fmt: skip
            raise OutputError("truncated", ["answer cut at the token limit"], result)
        raise LLMHTTPError(503, "down")

    b = budget()
    outcome = await Controller("t-err", max_attempts=3, patience=3).run(
        generate=generate, evaluate=lambda v: [], fallback=lambda: FALLBACK, budget=b
    )
    assert outcome.stop_reason is StopReason.ERROR
    assert outcome.value == FALLBACK
    assert outcome.history[0].errors == ["answer cut at the token limit"]
    assert b.spent_tokens == 33  # the truncated answer's tokens were charged


async def test_async_evaluate_and_fallback_and_attempt_histogram() -> None:
    async def evaluate(v: str) -> list[str]:
        return []

    async def fallback() -> str:
        return FALLBACK

    generate, _ = scripted([("fine", 1)])
    before = (
        REGISTRY.get_sample_value("coachbus_repair_attempts_count", {"decision": "t-hist"}) or 0
    )
    outcome = await Controller("t-hist").run(
        generate=generate,
        evaluate=evaluate,
        fallback=fallback,
        budget=budget(),  # type: ignore[arg-type]
    )
    assert outcome.value == "fine"
    assert (
        REGISTRY.get_sample_value("coachbus_repair_attempts_count", {"decision": "t-hist"})
        == before + 1
    )


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        Controller("x", max_attempts=0)
