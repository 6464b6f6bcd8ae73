"""The router: policy from TOML, escalation rules, fallbacks, the human tier."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import respx
from pydantic import BaseModel, Field

from coachbus.contracts import HumanReviewRequest, TurnBudget
from coachbus.llm import (
    DECISION_KINDS,
    OPTIONAL_KINDS,
    REPORTED_KINDS,
    DecisionContext,
    LLMClient,
    Message,
    Policy,
    Router,
    StopReason,
)
from coachbus.metrics import REGISTRY
from tests.shared.llm.conftest import SMALL, STRONG, SimFactory, fast_settings

pytestmark = pytest.mark.unit

URL = "http://llm.test/v1/chat/completions"
Level = Literal["low", "moderate", "high", "critical"]


class Screen(BaseModel):
    level: Level
    reasons: list[str] = Field(max_length=3)


SAFE = Screen(level="moderate", reasons=["safe default while a human looks"])


def turn_budget(tokens: int = 20_000, seconds: float = 30) -> TurnBudget:
    return TurnBudget(max_tokens=tokens, deadline_at=datetime.now(UTC) + timedelta(seconds=seconds))


def messages(tier: str, errors: list[str]) -> list[Message]:
    msgs: list[Message] = [{"role": "user", "content": "I feel stuck"}]
    if errors:
        msgs.append({"role": "user", "content": "Fix: " + "; ".join(errors)})
    return msgs


def answer(content: str) -> httpx.Response:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": "stop"}]}
    usage = {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10}}
    body = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(usage)}\n\ndata: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())


def by_model(replies: dict[str, list[str]]) -> Any:
    """A respx side effect answering per model name, in order."""

    def handler(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return answer(replies[model].pop(0))

    return handler


def tier_count(kind: str, tier: str) -> float:
    return (
        REGISTRY.get_sample_value("coachbus_tier_decisions_total", {"decision": kind, "tier": tier})
        or 0.0
    )


async def decide(router: Router, confidence: float, **kw: Any) -> Any:
    params: dict[str, Any] = {
        "kind": "risk_screen",
        "agent": "stability",
        "deterministic": lambda: (Screen(level="low", reasons=["keywords only"]), confidence),
        "build_messages": messages,
        "response_model": Screen,
        "budget": turn_budget(),
    }
    params.update(kw)
    return await router.decide(**params)


def test_shipped_policy_covers_every_decision_kind() -> None:
    policy = Policy.load()
    assert set(policy.decisions) == set(DECISION_KINDS) | set(REPORTED_KINDS) | set(OPTIONAL_KINDS)
    for kind, rule in policy.decisions.items():
        assert rule.tiers[0] == "deterministic", kind
    assert policy.for_kind("risk_screen").tiers == ("deterministic", "small", "strong", "human")
    assert policy.for_kind("coach_reply").priority == 0


def test_policy_file_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = Policy.load()
    bad = tmp_path / "policy.toml"
    bad.write_text('[decision.coach_reply]\ntiers = ["small", "deterministic"]\n')
    with pytest.raises(ValueError, match="lacks decision kinds"):
        Policy.load(bad)
    body = "[defaults]\nmin_confidence = 0.5\nmax_attempts = 2\npatience = 1\nmax_tokens = 64\n"
    for kind in DECISION_KINDS:
        tiers = '["small", "deterministic"]' if kind == "coach_reply" else '["deterministic"]'
        body += f"[decision.{kind}]\ntiers = {tiers}\n"
    bad.write_text(body)
    with pytest.raises(ValueError, match="deterministic tier must come first"):
        Policy.load(bad)
    good = tmp_path / "good.toml"
    good.write_text(body.replace('["small", "deterministic"]', '["deterministic", "strong"]'))
    monkeypatch.setenv("COACHBUS_LLM_POLICY_FILE", str(good))
    loaded = Policy.load()
    assert loaded.for_kind("coach_reply").tiers == ("deterministic", "strong")
    assert loaded != shipped


async def test_without_llm_the_deterministic_answer_comes_back_without_network() -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.route().mock(return_value=httpx.Response(500))
        async with LLMClient(fast_settings(base_url=None)) as client:
            router = Router(client=client)
            before = tier_count("risk_screen", "deterministic")
            out = await decide(router, confidence=0.1)
            no_client = await decide(Router(client=None), confidence=0.1)
    assert route.call_count == 0
    assert out.tier == no_client.tier == "deterministic"
    assert out.value.reasons == ["keywords only"]
    assert out.fallback_reason is None
    assert tier_count("risk_screen", "deterministic") == before + 2


@respx.mock
async def test_confident_deterministic_answer_needs_no_llm() -> None:
    route = respx.post(URL).mock(return_value=answer("{}"))
    async with LLMClient(fast_settings()) as client:
        out = await decide(Router(client=client), confidence=0.95)
    assert out.tier == "deterministic"
    assert route.call_count == 0


@respx.mock
async def test_low_confidence_escalates_to_the_small_model() -> None:
    respx.post(URL).mock(side_effect=by_model({SMALL: ['{"level": "high", "reasons": ["llm"]}']}))
    async with LLMClient(fast_settings()) as client:
        before = tier_count("pattern_classification", "small")
        out = await decide(Router(client=client), confidence=0.3, kind="pattern_classification")
    assert out.tier == "small"
    assert out.value == Screen(level="high", reasons=["llm"])
    assert out.stop_reason is StopReason.SUCCESS
    assert out.usage.llm_calls == 1
    assert [s.result for s in out.trail] == ["low_confidence", "success"]
    assert tier_count("pattern_classification", "small") == before + 1


@respx.mock
async def test_failed_validation_is_repaired_then_escalated_to_the_strong_model() -> None:
    replies = {
        # Schema violation (4 reasons), then a semantic one: no improvement -> strong.
        SMALL: [
            '{"level": "low", "reasons": ["a", "b", "c", "d"]}',
            '{"level": "low", "reasons": []}',
        ],
        STRONG: ['{"level": "moderate", "reasons": ["a real reason"]}'],
    }
    route = respx.post(URL).mock(side_effect=by_model(replies))

    def validate(v: Screen) -> list[str]:
        return [] if v.reasons else ["reasons: give at least one"]

    async with LLMClient(fast_settings()) as client:
        out = await decide(
            Router(client=client), confidence=0.3, kind="blocked_steps", validate=validate
        )
    assert out.tier == "strong"
    assert out.value.level == "moderate"
    assert [s.tier for s in out.trail] == ["deterministic", "small", "strong"]
    assert out.trail[1].result == "no_improvement"
    # The repair prompt carried the schema errors of the first answer.
    second = json.loads(route.calls[1].request.content)["messages"][-1]["content"]
    assert second.startswith("Fix: reasons")
    assert out.usage.llm_calls == 3


@respx.mock
async def test_every_tier_failing_falls_back_to_deterministic_marked() -> None:
    bad = '{"level": "extreme", "reasons": []}'
    respx.post(URL).mock(side_effect=by_model({SMALL: [bad] * 3, STRONG: [bad] * 3}))
    async with LLMClient(fast_settings()) as client:
        out = await decide(Router(client=client), confidence=0.3, kind="synthesis_prose")
    assert out.tier == "deterministic"
    assert out.value.reasons == ["keywords only"]
    assert out.fallback_reason == "oscillation"
    assert out.stop_reason is StopReason.OSCILLATION


@respx.mock
async def test_spent_budget_does_not_escalate() -> None:
    route = respx.post(URL).mock(side_effect=by_model({SMALL: ['{"level": "bad"}']}))
    async with LLMClient(fast_settings()) as client:
        out = await decide(
            Router(client=client),
            confidence=0.3,
            kind="blocked_steps",
            budget=turn_budget(tokens=80),
        )
    assert out.stop_reason is StopReason.BUDGET_TOKENS
    assert out.tier == "deterministic"
    assert out.fallback_reason == "budget_tokens"
    assert route.call_count == 1  # no strong-tier call after the budget ran out


@respx.mock
async def test_high_risk_goes_to_a_human_and_the_turn_continues_safely() -> None:
    respx.post(URL).mock(
        side_effect=by_model({SMALL: ['{"level": "critical", "reasons": ["plan"]}']})
    )
    published: list[HumanReviewRequest] = []

    async def publish(request: HumanReviewRequest) -> None:
        published.append(request)

    ctx = DecisionContext(turn_id="t1", session_id="s1", user_id="u1", message="I want to end it")
    async with LLMClient(fast_settings()) as client:
        router = Router(client=client, publish_human_review=publish)
        out = await decide(
            router, confidence=0.3, context=ctx, severity=lambda v: v.level, safe=lambda: SAFE
        )
    assert out.tier == "human"
    assert out.human_pending
    assert out.value == SAFE
    assert out.escalated_value.level == "critical"
    assert len(published) == 1
    assert published[0].severity == "critical"
    assert published[0].decision == "risk_screen"
    assert published[0].excerpt == "I want to end it"


async def test_without_llm_a_severe_risk_still_reaches_a_human_but_stays_deterministic() -> None:
    published: list[HumanReviewRequest] = []

    async def publish(request: HumanReviewRequest) -> None:
        published.append(request)

    ctx = DecisionContext(turn_id="t1", session_id="s1", user_id="u1", message="help")
    out = await Router(client=None, publish_human_review=publish).decide(
        kind="risk_screen",
        agent="stability",
        deterministic=lambda: (Screen(level="critical", reasons=["keyword"]), 0.99),
        build_messages=messages,
        response_model=Screen,
        budget=turn_budget(),
        context=ctx,
        severity=lambda v: v.level,
    )
    assert out.tier == "deterministic"
    assert out.human_pending
    assert len(published) == 1


async def test_end_to_end_through_the_simulator(sim: SimFactory) -> None:
    async with sim() as url, LLMClient(fast_settings(url)) as client:
        out = await decide(Router(client=client), confidence=0.2, kind="ocean_update")
    assert out.tier == "small"
    assert isinstance(out.value, Screen)
    assert out.usage.prompt_tokens > 0
    assert out.usage.llm_calls == 1


@respx.mock
@pytest.mark.parametrize("on_failure", [False, True])
async def test_failed_llm_tiers_reach_a_human_only_when_the_policy_says_so(
    on_failure: bool,
) -> None:
    # Both tiers answer with invalid output: every LLM tier fails.
    respx.post(URL).mock(
        side_effect=by_model({SMALL: ['{"level": "bad"}'] * 5, STRONG: ['{"level": "bad"}'] * 5})
    )
    published: list[HumanReviewRequest] = []

    async def publish(request: HumanReviewRequest) -> None:
        published.append(request)

    base = Policy.load()
    risk = base.for_kind("risk_screen").model_copy(update={"human_on_failure": on_failure})
    policy = base.model_copy(update={"decisions": {**base.decisions, "risk_screen": risk}})
    ctx = DecisionContext(turn_id="t1", session_id="s1", user_id="u1", message="meh")
    async with LLMClient(fast_settings()) as client:
        out = await decide(
            Router(policy=policy, client=client, publish_human_review=publish),
            confidence=0.3,
            context=ctx,
            severity=lambda v: v.level if v.level in ("low", "moderate") else None,
        )
    assert out.fallback_reason is not None
    assert out.human_pending is on_failure
    assert len(published) == (1 if on_failure else 0)
