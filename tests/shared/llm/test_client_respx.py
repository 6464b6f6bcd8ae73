"""The client against mocked HTTP (respx): request fields, parsing, retries, breaker."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import respx
from pydantic import BaseModel, Field

from coachbus.llm import (
    ChatRequest,
    CircuitOpenError,
    LLMClient,
    LLMDisabledError,
    LLMHTTPError,
    LLMTimeoutError,
    OutputError,
)
from coachbus.metrics import REGISTRY
from tests.shared.llm.conftest import fast_settings

pytestmark = pytest.mark.unit

URL = "http://llm.test/v1/chat/completions"


class Mood(BaseModel):
    mood: str
    score: int = Field(ge=1, le=5)


def sse(
    *deltas: str, finish: str = "stop", usage: dict[str, int] | None = None, **extra: Any
) -> bytes:
    """A chat-completion event stream as vLLM sends it."""
    out = []
    base = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    out.append({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    for key, value in extra.items():
        out.append({**base, "choices": [{"index": 0, "delta": {key: value}}]})
    for d in deltas:
        out.append(
            {**base, "choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]}
        )
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage is not None:
        out.append({**base, "choices": [], "usage": usage})
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in out) + b"data: [DONE]\n\n"


def sse_response(body: bytes, status: int = 200) -> httpx.Response:
    return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=body)


def req(**kw: Any) -> ChatRequest:
    base: dict[str, Any] = {"agent": "persona", "messages": [{"role": "user", "content": "hi"}]}
    base.update(kw)
    return ChatRequest(**base)


@respx.mock
async def test_the_body_is_json_with_its_content_type_and_utf8_as_sent() -> None:
    route = respx.post(URL).mock(return_value=sse_response(sse("fine")))
    async with LLMClient(fast_settings()) as client:
        await client.chat(req(messages=[{"role": "user", "content": "Ich schaffe es nicht – 😀"}]))
    request = route.calls.last.request
    assert request.headers["content-type"] == "application/json"
    # The wire format httpx's json= had: raw UTF-8, no \u escapes.
    assert "Ich schaffe es nicht – 😀".encode() in request.content
    assert json.loads(request.content)["messages"][0]["content"] == "Ich schaffe es nicht – 😀"


@respx.mock
async def test_request_carries_every_field() -> None:
    route = respx.post(URL).mock(
        return_value=sse_response(
            sse('{"mood": "ok", "score": 3}', usage={"prompt_tokens": 11, "completion_tokens": 7})
        )
    )
    settings = fast_settings(api_key="k-123", cache_salt="turn-salt", max_tokens_cap=300)
    async with LLMClient(settings) as client:
        res = await client.chat(req(agent="coach", response_model=Mood, priority=0, max_tokens=999))
    body = json.loads(route.calls.last.request.content)
    assert route.calls.last.request.headers["authorization"] == "Bearer k-123"
    assert body["model"] == settings.small_model
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["priority"] == 0
    assert body["cache_salt"] == "turn-salt"
    assert body["max_tokens"] == 300  # capped
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Mood"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == Mood.model_json_schema()
    assert res.parsed_as(Mood) == Mood(mood="ok", score=3)
    assert (res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.llm_calls) == (11, 7, 1)
    assert not res.usage_estimated
    assert res.finish_reason == "stop"
    assert res.ttft_s is not None
    assert res.latency_s >= res.ttft_s


@respx.mock
async def test_thinking_per_agent_and_per_call_and_no_priority_by_default() -> None:
    route = respx.post(URL).mock(side_effect=lambda r: sse_response(sse("fine")))
    settings = fast_settings(thinking={"shadow": True, "coach": False})
    async with LLMClient(settings) as client:
        await client.chat(req(agent="shadow"))
        shadow = json.loads(route.calls.last.request.content)
        await client.chat(req(agent="shadow", thinking=False, tier="strong"))
        override = json.loads(route.calls.last.request.content)
    assert shadow["chat_template_kwargs"] == {"enable_thinking": True}
    assert "priority" not in shadow
    assert "response_format" not in shadow
    assert override["chat_template_kwargs"] == {"enable_thinking": False}
    assert override["model"] == settings.strong_model


@respx.mock
async def test_reasoning_is_ignored_for_parsing_and_inline_think_is_stripped() -> None:
    respx.post(URL).mock(
        side_effect=[
            sse_response(
                sse('{"mood": "a", "score": 2}', reasoning_content="let me think {not json")
            ),
            sse_response(sse('<think>hmm {"x"</think>', '{"mood": "b", "score": 4}')),
        ]
    )
    async with LLMClient(fast_settings()) as client:
        first = await client.chat(req(response_model=Mood, thinking=True))
        second = await client.chat(req(response_model=Mood, thinking=True))
    assert first.parsed_as(Mood).mood == "a"
    assert "let me think" in first.reasoning
    assert second.parsed_as(Mood).score == 4


@respx.mock
async def test_plain_json_body_is_understood_and_usage_estimated_when_missing() -> None:
    respx.post(URL).mock(
        side_effect=[
            httpx.Response(
                200,
                json={
                    "model": "m",
                    "choices": [
                        {"index": 0, "message": {"content": "hello"}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                },
            ),
            sse_response(sse("two words")),
        ]
    )
    async with LLMClient(fast_settings()) as client:
        whole = await client.chat(req())
        no_usage = await client.chat(req())
    assert whole.text == "hello"
    assert whole.usage.completion_tokens == 1
    assert no_usage.usage_estimated
    assert no_usage.usage.prompt_tokens > 0
    assert no_usage.usage.completion_tokens > 0


@respx.mock
async def test_retries_429_and_5xx_then_succeeds() -> None:
    route = respx.post(URL).mock(
        side_effect=[
            httpx.Response(429, headers={"retry-after": "0"}, json={"error": "slow down"}),
            httpx.Response(503, json={"error": "busy"}),
            sse_response(sse("ok")),
        ]
    )
    async with LLMClient(fast_settings()) as client:
        res = await client.chat(req())
    assert route.call_count == 3
    assert res.text == "ok"
    assert res.attempts == 3


@respx.mock
async def test_connection_errors_are_retried_and_reported() -> None:
    route = respx.post(URL).mock(side_effect=httpx.ConnectError("refused"))
    async with LLMClient(fast_settings(retry_attempts=4)) as client:
        with pytest.raises(Exception, match="ConnectError") as info:
            await client.chat(req())
    assert type(info.value).__name__ == "LLMConnectionError"
    assert route.call_count == 4


@respx.mock
async def test_client_errors_are_not_retried() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(400, json={"error": "bad"}))
    async with LLMClient(fast_settings()) as client:
        with pytest.raises(LLMHTTPError) as info:
            await client.chat(req())
    assert info.value.status == 400
    assert route.call_count == 1


@respx.mock
async def test_breaker_opens_refuses_without_request_and_recovers_half_open() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(500, json={"error": "down"}))
    settings = fast_settings(retry_attempts=2, breaker_failure_threshold=4, breaker_reset_s=0.2)
    async with LLMClient(settings) as client:
        for _ in range(2):
            with pytest.raises(LLMHTTPError):
                await client.chat(req())
        assert route.call_count == 4
        assert client.breaker("small").state == "open"
        with pytest.raises(CircuitOpenError):
            await client.chat(req())
        assert route.call_count == 4  # refused locally
        # Both tiers live on one server: the strong tier shares the open breaker.
        with pytest.raises(CircuitOpenError):
            await client.chat(req(tier="strong"))

        import asyncio

        await asyncio.sleep(0.25)
        assert client.breaker("small").state == "half_open"
        route.mock(return_value=sse_response(sse("back")))
        res = await client.chat(req())
        assert res.text == "back"
        assert client.breaker("small").state == "closed"


@respx.mock
async def test_separate_tier_endpoints_have_separate_breakers() -> None:
    small = respx.post("http://small.test/v1/chat/completions").mock(
        return_value=httpx.Response(500, json={})
    )
    strong = respx.post("http://strong.test/v1/chat/completions").mock(
        return_value=sse_response(sse("strong ok"))
    )
    settings = fast_settings(
        base_url=None,
        small_base_url="http://small.test/v1",
        strong_base_url="http://strong.test/v1",
        retry_attempts=1,
        breaker_failure_threshold=1,
    )
    async with LLMClient(settings) as client:
        with pytest.raises(LLMHTTPError):
            await client.chat(req())
        assert client.breaker("small").state == "open"
        assert (await client.chat(req(tier="strong"))).text == "strong ok"
    assert small.call_count == 1
    assert strong.call_count == 1


@respx.mock
async def test_llamacpp_quirk_negotiates_json_object_with_schema_once() -> None:
    def server(request: httpx.Request) -> httpx.Response:
        fmt = json.loads(request.content).get("response_format", {})
        if fmt.get("type") == "json_schema":
            return httpx.Response(500, json={"error": {"message": "unsupported"}})
        assert fmt == {"type": "json_object", "schema": Mood.model_json_schema()}
        return sse_response(sse('{"mood": "x", "score": 1}'))

    route = respx.post(URL).mock(side_effect=server)
    async with LLMClient(fast_settings()) as client:
        first = await client.chat(req(response_model=Mood))
        second = await client.chat(req(response_model=Mood))
    assert first.parsed_as(Mood).mood == second.parsed_as(Mood).mood == "x"
    assert route.call_count == 3  # one refusal, then json_object straight away


@respx.mock
async def test_schema_is_validated_whatever_the_server_enforced() -> None:
    respx.post(URL).mock(return_value=sse_response(sse('{"mood": "x", "score": 9}')))
    async with LLMClient(fast_settings()) as client:
        with pytest.raises(OutputError) as info:
            await client.chat(req(response_model=Mood))
    assert info.value.kind == "schema"
    assert any(e.startswith("score:") for e in info.value.errors)
    assert info.value.result.usage.llm_calls == 1  # the spent tokens travel with the error


@respx.mock
async def test_truncated_and_invalid_json_are_told_apart() -> None:
    respx.post(URL).mock(
        side_effect=[
            sse_response(sse('{"mood": "x", "sc', finish="length")),
            sse_response(sse('{"mood": "x",, }')),
        ]
    )
    async with LLMClient(fast_settings()) as client:
        with pytest.raises(OutputError) as cut:
            await client.chat(req(response_model=Mood))
        with pytest.raises(OutputError) as broken:
            await client.chat(req(response_model=Mood))
    assert cut.value.kind == "truncated"
    assert broken.value.kind == "invalid_json"


@respx.mock
async def test_endless_whitespace_is_aborted_early() -> None:
    body = sse('{"mood": ', *(["\n", "   "] * 2000), finish="length")
    respx.post(URL).mock(return_value=sse_response(body))
    async with LLMClient(fast_settings(whitespace_run_limit=64)) as client:
        with pytest.raises(OutputError) as info:
            await client.chat(req(response_model=Mood))
    assert info.value.kind == "whitespace"
    # It stopped reading at the limit instead of swallowing all 2000 pieces.
    assert len(info.value.result.text) < 200


@respx.mock
async def test_mid_stream_error_event_is_retried() -> None:
    error_stream = b'data: {"error": {"message": "engine died", "code": 500}}\n\n'
    route = respx.post(URL).mock(
        side_effect=[sse_response(error_stream), sse_response(sse("fine"))]
    )
    async with LLMClient(fast_settings()) as client:
        assert (await client.chat(req())).text == "fine"
    assert route.call_count == 2


@respx.mock
async def test_deadline_in_the_past_makes_no_request() -> None:
    route = respx.post(URL).mock(return_value=sse_response(sse("x")))
    past = datetime.now(UTC) - timedelta(seconds=1)
    async with LLMClient(fast_settings()) as client:
        with pytest.raises(LLMTimeoutError):
            await client.chat(req(deadline_at=past))
    assert route.call_count == 0


async def test_disabled_client_refuses_tiers() -> None:
    settings = fast_settings(base_url=None)
    assert not settings.enabled
    async with LLMClient(settings) as client:
        assert not client.enabled
        with pytest.raises(LLMDisabledError):
            await client.chat(req())


@respx.mock
async def test_usage_and_latency_are_recorded_in_metrics() -> None:
    respx.post(URL).mock(
        return_value=sse_response(sse("x", usage={"prompt_tokens": 40, "completion_tokens": 2}))
    )
    settings = fast_settings(small_model="metrics-probe-model")
    labels = {"agent": "plasticity", "model": "metrics-probe-model", "kind": "prompt"}
    before = REGISTRY.get_sample_value("coachbus_llm_tokens_total", labels) or 0.0
    async with LLMClient(settings) as client:
        await client.chat(req(agent="plasticity"))
    assert REGISTRY.get_sample_value("coachbus_llm_tokens_total", labels) == before + 40
    count = REGISTRY.get_sample_value(
        "coachbus_llm_request_seconds_count",
        {"agent": "plasticity", "model": "metrics-probe-model", "tier": "small", "outcome": "ok"},
    )
    assert count is not None
    assert count >= 1
