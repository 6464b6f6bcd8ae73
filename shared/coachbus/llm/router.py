"""The router: the cheapest tier that carries a decision.

The policy (``policy.toml``) lists for each decision kind the tiers to try,
deterministic code first. Each LLM tier runs inside a :class:`Controller`
repair loop; what the loop cannot fix moves up a tier, and what no tier can fix
falls back to the deterministic answer, marked with the stop reason.

Human tier semantics: when a decision goes to a human, a
:class:`~coachbus.contracts.HumanReviewRequest` is published and the outcome
carries ``tier="human"``, ``human_pending=True`` and a *safe* value (the
caller's ``safe()`` or else the deterministic answer), so the turn continues at
once; the value that triggered the review is kept in ``escalated_value``.
"""

from __future__ import annotations

import inspect
import logging
import tomllib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from coachbus.contracts import TIER_RANK, HumanReviewRequest, Tier, TurnBudget, Usage
from coachbus.llm.api import ChatRequest, Message
from coachbus.llm.client import LLMClient
from coachbus.llm.controller import (
    Budget,
    BudgetExceededError,
    Controller,
    ControlOutcome,
    Generation,
    RepairContext,
    StopReason,
)
from coachbus.llm.settings import LLMSettings, LLMTier
from coachbus.llm.tokens import count_messages_within
from coachbus.metrics import TIER_DECISIONS
from coachbus.safety.severity import SEVERITY_RANK, Severity

log = logging.getLogger(__name__)

T = TypeVar("T")
# The response model the LLM tiers answer in; ``convert`` maps it to T.
R = TypeVar("R", bound=BaseModel)
DECISION_KINDS = (
    "coach_reply",
    "ocean_update",
    "risk_screen",
    "blocked_steps",
    "pattern_classification",
    "synthesis_prose",
    "memory_compression",
)
# Decisions no model carries yet, whose bar the eval reads to count silent errors
# (coachbus.confidence): optional in an operator's policy file (the shipped bar is
# used when one leaves them out), so adding one breaks no deployed policy.
REPORTED_KINDS = ("language_register",)
# Decisions a model carries that came after the policy file's kinds settled: optional
# in an operator's file too (the shipped entry is used when one leaves them out), so
# an upgrade breaks no deployed policy; an operator's entry overrides the shipped one.
OPTIONAL_KINDS = ("reply_guard",)


class DecisionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tiers: tuple[Tier, ...]
    min_confidence: float = Field(ge=0, le=1)
    max_attempts: int = Field(ge=1, le=10)
    patience: int = Field(ge=1, le=10)
    max_tokens: int = Field(ge=16)
    priority: int | None = None
    human_at: Severity | None = None
    # Also put the decision before a human when every LLM tier failed. Off by
    # default: a weak model would otherwise fill the review queue with routine turns.
    human_on_failure: bool = False

    @model_validator(mode="after")
    def _ordered(self) -> DecisionPolicy:
        if not self.tiers or self.tiers[0] != "deterministic":
            raise ValueError("the deterministic tier must come first: it is the fallback")
        ranks = [TIER_RANK[t] for t in self.tiers]
        if ranks != sorted(set(ranks)):
            raise ValueError(f"tiers must go up, each once: {self.tiers}")
        if self.human_at is not None and "human" not in self.tiers:
            raise ValueError("human_at needs the human tier in tiers")
        return self


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    decisions: dict[str, DecisionPolicy]

    @classmethod
    def from_toml(cls, text: str) -> Policy:
        raw = tomllib.loads(text)
        defaults: dict[str, Any] = raw.pop("defaults", {})
        decisions: dict[str, Any] = raw.pop("decision", {})
        if raw:
            raise ValueError(f"unknown policy sections: {sorted(raw)}")
        missing = set(DECISION_KINDS) - set(decisions)
        if missing:
            raise ValueError(f"policy lacks decision kinds: {sorted(missing)}")
        return cls(decisions={k: {**defaults, **v} for k, v in decisions.items()})  # type: ignore[misc]

    @classmethod
    def load(cls, path: str | Path | None = None) -> Policy:
        """Load ``path``, else ``$COACHBUS_LLM_POLICY_FILE``, else the shipped policy."""
        path = path or LLMSettings().policy_file
        if path:
            return cls.from_toml(Path(path).read_text(encoding="utf-8"))
        return cls.load_shipped()

    @classmethod
    def load_shipped(cls) -> Policy:
        shipped = resources.files("coachbus.llm").joinpath("policy.toml")
        return cls.from_toml(shipped.read_text(encoding="utf-8"))

    def for_kind(self, kind: str) -> DecisionPolicy:
        try:
            return self.decisions[kind]
        except KeyError:
            if kind in REPORTED_KINDS or kind in OPTIONAL_KINDS:
                return Policy.load_shipped().decisions[kind]
            raise KeyError(f"no policy for decision kind {kind!r}") from None


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """Who the decision is for; needed to address a human review request."""

    turn_id: str
    session_id: str
    user_id: str
    message: str


@dataclass(frozen=True, slots=True)
class TrailStep:
    tier: Tier
    result: str  # accepted | low_confidence | skipped | <stop reason> | published
    detail: str = ""


@dataclass(slots=True)
class Outcome(Generic[T]):
    value: T
    tier: Tier
    usage: Usage
    stop_reason: StopReason | None = None
    fallback_reason: str | None = None
    confidence: float | None = None
    human_pending: bool = False
    escalated_value: T | None = None
    attempts: int = 0
    trail: list[TrailStep] = field(default_factory=list)


PublishHumanReview = Callable[[HumanReviewRequest], Awaitable[None]]


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class Router:
    def __init__(
        self,
        *,
        policy: Policy | None = None,
        client: LLMClient | None = None,
        publish_human_review: PublishHumanReview | None = None,
    ) -> None:
        self.policy = policy or Policy.load()
        self.client = client
        self.publish_human_review = publish_human_review

    @property
    def llm_enabled(self) -> bool:
        return self.client is not None and self.client.enabled

    async def decide(
        self,
        *,
        kind: str,
        agent: str,
        deterministic: Callable[[], tuple[T, float] | Awaitable[tuple[T, float]]],
        build_messages: Callable[[LLMTier, list[str]], list[Message]],
        response_model: type[R],
        budget: TurnBudget | Budget,
        validate: Callable[[T], list[str]] | None = None,
        context: DecisionContext | None = None,
        severity: Callable[[T], Severity | None] | None = None,
        safe: Callable[[], T] | None = None,
        convert: Callable[[R], T] | None = None,
    ) -> Outcome[T]:
        """Take decision ``kind`` on the cheapest tier that carries it.

        ``deterministic()`` returns (value, confidence in 0..1) and is always run:
        it is the first tier and the fallback. ``convert`` maps the LLM's parsed
        ``response_model`` to the value type (default: used as is). ``validate``
        adds semantic checks to the schema's.
        """
        policy = self.policy.for_kind(kind)
        ledger = budget if isinstance(budget, Budget) else Budget(budget)
        det_value, confidence = await _maybe_await(deterministic())
        out: Outcome[T] = Outcome(
            value=det_value, tier="deterministic", usage=Usage(), confidence=confidence
        )

        accepted = confidence >= policy.min_confidence
        out.trail.append(
            TrailStep(
                "deterministic", "accepted" if accepted else "low_confidence", f"{confidence:.2f}"
            )
        )
        llm_failed = False
        if not accepted:
            for tier in policy.tiers[1:]:
                if tier == "human":
                    break
                llm_tier = cast(LLMTier, tier)
                if self.client is None or not self.client.has_tier(llm_tier):
                    out.trail.append(TrailStep(tier, "skipped", "no endpoint"))
                    continue
                control = await self._run_tier(
                    kind,
                    agent,
                    llm_tier,
                    policy,
                    ledger,
                    build_messages,
                    response_model,
                    validate,
                    convert,
                    det_value,
                )
                out.usage = out.usage + control.usage
                out.attempts += control.attempts
                out.stop_reason = control.stop_reason
                out.trail.append(
                    TrailStep(tier, control.stop_reason.value, "; ".join(control.errors)[:200])
                )
                if control.success:
                    out.value, out.tier, out.fallback_reason = control.value, tier, None
                    accepted = True
                    break
                llm_failed = True
                out.fallback_reason = control.stop_reason.value
                if control.stop_reason in (StopReason.BUDGET_TOKENS, StopReason.BUDGET_TIME):
                    break  # a stronger tier would cost more of what is already gone

        await self._maybe_human(out, policy, kind, severity, safe, context, det_value, llm_failed)
        TIER_DECISIONS.labels(kind, out.tier).inc()
        return out

    async def _run_tier(
        self,
        kind: str,
        agent: str,
        tier: LLMTier,
        policy: DecisionPolicy,
        ledger: Budget,
        build_messages: Callable[[LLMTier, list[str]], list[Message]],
        response_model: type[R],
        validate: Callable[[T], list[str]] | None,
        convert: Callable[[R], T] | None,
        det_value: T,
    ) -> ControlOutcome[T]:
        client = self.client
        assert client is not None

        async def generate(ctx: RepairContext) -> Generation[T]:
            messages = build_messages(tier, ctx.previous_errors)
            # Exact only when it could matter: a prompt that leaves room for the
            # policy's whole answer by its bytes gets the same max_tokens.
            prompt_tokens = count_messages_within(
                messages, ctx.remaining_tokens - policy.max_tokens, client.counter
            )
            affordable = ctx.remaining_tokens - prompt_tokens
            if affordable < 16:
                raise BudgetExceededError(f"{affordable} tokens left for the answer")
            res = await client.chat(
                ChatRequest(
                    agent=agent,
                    tier=tier,
                    messages=messages,
                    response_model=response_model,
                    priority=policy.priority,
                    max_tokens=min(policy.max_tokens, affordable),
                    deadline_at=ctx.deadline_at,
                )
            )
            parsed = res.parsed_as(response_model)
            value = convert(parsed) if convert else cast(T, parsed)
            return Generation(value=value, usage=res.usage, output=res.text)

        def evaluate(value: T) -> list[str]:
            return list(validate(value)) if validate else []

        controller = Controller(
            f"{kind}:{tier}", max_attempts=policy.max_attempts, patience=policy.patience
        )
        return await controller.run(
            generate=generate, evaluate=evaluate, fallback=lambda: det_value, budget=ledger
        )

    async def _maybe_human(
        self,
        out: Outcome[T],
        policy: DecisionPolicy,
        kind: str,
        severity: Callable[[T], Severity | None] | None,
        safe: Callable[[], T] | None,
        context: DecisionContext | None,
        det_value: T,
        llm_failed: bool,
    ) -> None:
        if "human" not in policy.tiers:
            return
        level = severity(out.value) if severity else None
        by_severity = (
            policy.human_at is not None
            and level is not None
            and SEVERITY_RANK[level] >= SEVERITY_RANK[policy.human_at]
        )
        # Without an LLM the low-confidence route to a human is off (every result
        # stays tier=deterministic), but a severe risk is still put before a human.
        by_failure = llm_failed and self.llm_enabled and policy.human_on_failure
        if not (by_severity or by_failure):
            return
        reason = (
            f"severity {level} at or above {policy.human_at}"
            if by_severity
            else f"no LLM tier carried it ({out.fallback_reason})"
        )
        if self.publish_human_review is None or context is None:
            log.warning("%s needs a human (%s) but no publisher/context was given", kind, reason)
            out.trail.append(TrailStep("human", "skipped", "no publisher"))
            return
        request = HumanReviewRequest(
            turn_id=context.turn_id,
            session_id=context.session_id,
            user_id=context.user_id,
            decision=kind,
            reason=reason,
            severity=level or "moderate",
            excerpt=context.message[:2000],
        )
        await self.publish_human_review(request)
        out.trail.append(TrailStep("human", "published", reason))
        out.human_pending = True
        out.escalated_value = out.value
        out.value = safe() if safe is not None else det_value
        if self.llm_enabled:
            out.tier = "human"
            out.fallback_reason = "human_review"


__all__ = [
    "DECISION_KINDS",
    "OPTIONAL_KINDS",
    "REPORTED_KINDS",
    "DecisionContext",
    "DecisionPolicy",
    "Outcome",
    "Policy",
    "PublishHumanReview",
    "Router",
    "Severity",
    "TrailStep",
]
