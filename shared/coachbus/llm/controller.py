"""The controller of every generate → evaluate → repair loop.

Goal: the evaluator finds no error. Cap: ``max_attempts``. Budget: the turn's
tokens and absolute deadline (a :class:`Budget` ledger over the
:class:`~coachbus.contracts.TurnBudget` carried in the message, so a redelivered
message cannot refill it). Stop conditions, checked after every attempt in this
order: success, oscillation, no improvement, budget spent, cap. A loop that stops
without success returns the fallback (the deterministic tier) marked with the reason.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Generic, TypeVar

from coachbus.contracts import TurnBudget, Usage
from coachbus.llm.api import LLMError, LLMTimeoutError, OutputError
from coachbus.metrics import REPAIR_ATTEMPTS, REPAIR_STOPS

log = logging.getLogger(__name__)

T = TypeVar("T")


class StopReason(StrEnum):
    SUCCESS = "success"
    CAP = "cap"
    BUDGET_TOKENS = "budget_tokens"
    BUDGET_TIME = "budget_time"
    OSCILLATION = "oscillation"
    NO_IMPROVEMENT = "no_improvement"
    ERROR = "error"


class BudgetExceededError(Exception):
    """Raised by a generator that cannot afford its next call."""


class Budget:
    """What is left of a turn's LLM budget. Shared by all decisions of one agent's turn.

    ``spent_tokens`` lets an agent that persisted its spending resume with it; the
    deadline is absolute, so time can never be refilled.
    """

    def __init__(
        self,
        budget: TurnBudget,
        *,
        spent_tokens: int = 0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.max_tokens = budget.max_tokens
        self.deadline_at = budget.deadline_at
        self.spent_tokens = spent_tokens
        self._clock = clock

    @property
    def remaining_tokens(self) -> int:
        return max(self.max_tokens - self.spent_tokens, 0)

    @property
    def remaining_s(self) -> float:
        return (self.deadline_at - self._clock()).total_seconds()

    def charge(self, usage: Usage) -> None:
        self.spent_tokens += usage.prompt_tokens + usage.completion_tokens


@dataclass(frozen=True, slots=True)
class RepairContext:
    """What a generator gets for attempt ``attempt`` (1-based)."""

    attempt: int
    previous_errors: list[str]
    previous_output: str | None
    remaining_tokens: int
    deadline_at: datetime


@dataclass(slots=True)
class Generation(Generic[T]):
    """One attempt's output. ``value=None`` with ``errors`` when it did not even parse."""

    value: T | None
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)
    # The raw output (e.g. the model's text), used to detect alternating outputs.
    output: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    attempt: int
    errors: list[str]
    signature: str
    output_key: str
    usage: Usage


@dataclass(slots=True)
class ControlOutcome(Generic[T]):
    value: T
    success: bool
    stop_reason: StopReason
    attempts: int
    usage: Usage
    errors: list[str]
    history: list[AttemptRecord]

    @property
    def fallback_reason(self) -> str | None:
        return None if self.success else self.stop_reason.value


_DIGITS = re.compile(r"\d+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def error_signature(errors: list[str]) -> str:
    """Errors with their varying details (numbers, quoted values) normalised away,
    so "items.3.score: 7 > 5" and "items.4.score: 9 > 5" count as the same error."""
    norm = sorted({_QUOTED.sub("'…'", _DIGITS.sub("#", e.lower())).strip() for e in errors})
    return hashlib.sha256("\n".join(norm).encode()).hexdigest()[:16]


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class Controller:
    """Runs one generate → evaluate → repair loop; reusable across turns."""

    def __init__(self, decision: str, *, max_attempts: int = 3, patience: int = 1) -> None:
        if max_attempts < 1 or patience < 1:
            raise ValueError("max_attempts and patience must be >= 1")
        self.decision = decision
        self.max_attempts = max_attempts
        self.patience = patience

    async def run(
        self,
        *,
        generate: Callable[[RepairContext], Awaitable[Generation[T]]],
        evaluate: Callable[[T], list[str] | Awaitable[list[str]]],
        fallback: Callable[[], T | Awaitable[T]],
        budget: Budget,
    ) -> ControlOutcome[T]:
        history: list[AttemptRecord] = []
        usage = Usage()
        errors: list[str] = []
        previous_output: str | None = None
        best = float("inf")
        since_best = 0
        reason = StopReason.CAP
        value: T | None = None

        for attempt in range(1, self.max_attempts + 1):
            pre = self._precheck(budget, history)
            if pre is not None:
                reason = pre
                break
            ctx = RepairContext(
                attempt=attempt,
                previous_errors=list(errors),
                previous_output=previous_output,
                remaining_tokens=budget.remaining_tokens,
                deadline_at=budget.deadline_at,
            )
            try:
                async with asyncio.timeout(budget.remaining_s):
                    gen = await generate(ctx)
            except OutputError as exc:
                gen = Generation(
                    value=None, usage=exc.result.usage, errors=exc.errors, output=exc.result.text
                )
            except BudgetExceededError:
                reason = StopReason.BUDGET_TOKENS
                break
            except (TimeoutError, LLMTimeoutError):
                reason = StopReason.BUDGET_TIME if budget.remaining_s <= 0.05 else StopReason.ERROR
                log.info("%s attempt %d timed out (%s)", self.decision, attempt, reason)
                history.append(AttemptRecord(attempt, ["timeout"], "timeout", "", Usage()))
                break
            except LLMError as exc:
                log.info("%s attempt %d failed: %s", self.decision, attempt, exc)
                history.append(AttemptRecord(attempt, [str(exc)], "error", "", Usage()))
                reason = StopReason.ERROR
                break
            except Exception:
                # A bug in a generator must not take the turn down: fall back, loudly.
                log.exception("%s attempt %d raised", self.decision, attempt)
                history.append(AttemptRecord(attempt, ["exception"], "error", "", Usage()))
                reason = StopReason.ERROR
                break

            budget.charge(gen.usage)
            usage = usage + gen.usage
            errors = list(gen.errors)
            if gen.value is not None and not errors:
                errors = list(await _maybe_await(evaluate(gen.value)))
            output_key = hashlib.sha256(
                (gen.output if gen.output is not None else repr(gen.value)).encode()
            ).hexdigest()[:16]
            signature = error_signature(errors) if errors else "ok"
            record = AttemptRecord(attempt, errors, signature, output_key, gen.usage)
            previous_output = gen.output

            if not errors and gen.value is not None:
                history.append(record)
                value = gen.value
                reason = StopReason.SUCCESS
                break
            if self._oscillates(record, history):
                history.append(record)
                reason = StopReason.OSCILLATION
                break
            history.append(record)
            if len(errors) < best:
                best, since_best = len(errors), 0
            else:
                since_best += 1
                if since_best >= self.patience:
                    reason = StopReason.NO_IMPROVEMENT
                    break
            post = self._postcheck(budget)
            if post is not None:
                reason = post
                break

        attempts = len(history)
        REPAIR_ATTEMPTS.labels(self.decision).observe(attempts)
        REPAIR_STOPS.labels(self.decision, reason.value).inc()
        if reason is StopReason.SUCCESS and value is not None:
            return ControlOutcome(value, True, reason, attempts, usage, [], history)
        fallback_value = await _maybe_await(fallback())
        return ControlOutcome(fallback_value, False, reason, attempts, usage, errors, history)

    @staticmethod
    def _precheck(budget: Budget, history: list[AttemptRecord]) -> StopReason | None:
        if budget.remaining_s <= 0:
            return StopReason.BUDGET_TIME
        if budget.remaining_tokens <= 0:
            return StopReason.BUDGET_TOKENS
        # Another attempt will cost about what the last one did: do not start one
        # that cannot finish inside the budget.
        last = history[-1].usage if history else None
        if (
            last is not None
            and budget.remaining_tokens < last.prompt_tokens + last.completion_tokens
        ):
            return StopReason.BUDGET_TOKENS
        return None

    @staticmethod
    def _postcheck(budget: Budget) -> StopReason | None:
        if budget.remaining_tokens <= 0:
            return StopReason.BUDGET_TOKENS
        if budget.remaining_s <= 0:
            return StopReason.BUDGET_TIME
        return None

    @staticmethod
    def _oscillates(record: AttemptRecord, history: list[AttemptRecord]) -> bool:
        if any(h.signature == record.signature for h in history):
            return True
        # A, B, A: the repair flips between two outputs.
        return len(history) >= 2 and history[-2].output_key == record.output_key
