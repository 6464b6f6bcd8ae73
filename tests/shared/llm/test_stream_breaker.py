"""The circuit breaker counts streams that break in the middle, as it counts calls.

The Coach's live path only streams: a server that accepts the request and then
dies mid-answer (an error event, a dropped connection) must open the breaker
like failing ``chat`` calls do, so the next turn fails fast instead of waiting.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from coachbus.llm import (
    ChatRequest,
    CircuitOpenError,
    LLMClient,
    LLMConnectionError,
    LLMHTTPError,
)
from coachbus.llm.breaker import CircuitBreaker
from tests.shared.llm.conftest import fast_settings

pytestmark = pytest.mark.unit

URL = "http://llm.test/v1/chat/completions"
THRESHOLD = 3
HEADERS = {"content-type": "text/event-stream"}


def delta(text: str) -> bytes:
    event = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(event)}\n\n".encode()


FINISH = (
    b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
)


class _Broken(httpx.AsyncByteStream):
    """A body that sends a few tokens, then the connection drops."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield delta("Hello ") + delta("there")
        raise httpx.ReadError("connection reset by peer")


def error_event() -> httpx.Response:
    # vLLM's shape when the engine dies after the response headers went out.
    body = delta("Hello ") + b'data: {"error": {"message": "engine died", "code": 500}}\n\n'
    return httpx.Response(200, headers=HEADERS, content=body)


def dropped() -> httpx.Response:
    return httpx.Response(200, headers=HEADERS, stream=_Broken())


def complete() -> httpx.Response:
    return httpx.Response(200, headers=HEADERS, content=delta("All ") + delta("good.") + FINISH)


BREAKS = {
    "error_event": (error_event, LLMHTTPError),
    "connection_drop": (dropped, LLMConnectionError),
}


def req(**kw: Any) -> ChatRequest:
    base: dict[str, Any] = {"agent": "coach", "messages": [{"role": "user", "content": "hi"}]}
    base.update(kw)
    return ChatRequest(**base)


async def consume(client: LLMClient, got: list[str]) -> None:
    async with client.stream(req()) as stream:
        async for piece in stream:
            got.append(piece)


async def stream_text(client: LLMClient) -> list[str]:
    """Consume one stream; the deltas that reached the caller."""
    got: list[str] = []
    await consume(client, got)
    return got


async def broken_stream(client: LLMClient, error: type[Exception]) -> None:
    got: list[str] = []
    with pytest.raises(error):
        await consume(client, got)
    assert got[0] == "Hello "  # it broke after the caller had text: no retry


def state_of(breaker: CircuitBreaker) -> str:
    # A call, not the property: mypy would keep the narrowed literal across clock moves.
    return breaker.state


@pytest.mark.parametrize("kind", sorted(BREAKS))
@respx.mock
async def test_streams_breaking_midway_open_the_breaker_and_the_next_call_fails_fast(
    kind: str,
) -> None:
    response, error = BREAKS[kind]
    route = respx.post(URL).mock(side_effect=lambda _request: response())
    settings = fast_settings(breaker_failure_threshold=THRESHOLD)
    async with LLMClient(settings) as client:
        for i in range(THRESHOLD):
            assert client.breaker("small").state == "closed", i
            await broken_stream(client, error)
        assert client.breaker("small").state == "open"
        assert route.call_count == THRESHOLD
        # Refused locally, before any request: the stream path and chat alike.
        with pytest.raises(CircuitOpenError):
            await stream_text(client)
        with pytest.raises(CircuitOpenError):
            await client.chat(req())
        assert route.call_count == THRESHOLD


@respx.mock
async def test_a_complete_stream_resets_the_count() -> None:
    answers = iter([error_event(), error_event(), complete(), error_event(), error_event()])
    respx.post(URL).mock(side_effect=lambda _request: next(answers))
    async with LLMClient(fast_settings(breaker_failure_threshold=THRESHOLD)) as client:
        for _ in range(2):
            await broken_stream(client, LLMHTTPError)
        assert await stream_text(client) == ["All ", "good."]
        for _ in range(2):
            await broken_stream(client, LLMHTTPError)
        # 2 + 2 failures, but not consecutive: still closed.
        assert client.breaker("small").state == "closed"


@respx.mock
async def test_a_caller_leaving_early_is_no_failure() -> None:
    """The Coach aborts a stream heading for a blocked step: not the server's fault."""
    respx.post(URL).mock(side_effect=lambda _request: complete())
    async with LLMClient(fast_settings(breaker_failure_threshold=THRESHOLD)) as client:
        for _ in range(THRESHOLD + 1):
            async with client.stream(req()) as stream:
                async for _piece in stream:
                    break
        assert client.breaker("small").state == "closed"


@respx.mock
async def test_a_half_open_probe_that_breaks_midway_reopens_at_once() -> None:
    now = [0.0]
    answers = iter([error_event(), error_event(), complete()])
    route = respx.post(URL).mock(side_effect=lambda _request: next(answers))
    async with LLMClient(fast_settings()) as client:
        # A breaker on a hand-moved clock (the client's own uses the monotonic one).
        breaker = CircuitBreaker("llm", threshold=1, reset_s=10.0, clock=lambda: now[0])
        client._route("small")[0].breaker = breaker
        await broken_stream(client, LLMHTTPError)
        assert breaker.state == "open"
        now[0] = 10.0
        assert state_of(breaker) == "half_open"
        await broken_stream(client, LLMHTTPError)  # the probe
        assert state_of(breaker) == "open"
        with pytest.raises(CircuitOpenError):
            await stream_text(client)
        assert route.call_count == 2
        now[0] = 20.0
        assert await stream_text(client) == ["All ", "good."]
        assert state_of(breaker) == "closed"


@respx.mock
async def test_the_coachs_live_path_opens_the_breaker() -> None:
    """What the Coach's router calls: StreamingLLM.chat, a stream under the hood."""
    from services.coach.prompts import CoachDraft
    from services.coach.stream import DeltaPublisher, StreamingLLM

    shown: list[str] = []

    async def publish(piece: str, seq: int) -> None:
        shown.append(piece)

    route = respx.post(URL).mock(side_effect=lambda _request: error_event())
    async with LLMClient(fast_settings(breaker_failure_threshold=THRESHOLD)) as client:
        live = StreamingLLM(
            client, DeltaPublisher(publish, lambda _text: []), lambda t: CoachDraft(text=t)
        )
        for _ in range(THRESHOLD):
            with pytest.raises(LLMHTTPError):
                await live.chat(req())
        assert client.breaker("small").state == "open"
        with pytest.raises(CircuitOpenError):
            await live.chat(req())
        assert route.call_count == THRESHOLD


@respx.mock
async def test_a_stream_breaking_before_its_first_delta_is_retried() -> None:
    """One path for chat and stream: an attempt is retried until it hands text out."""
    early = b'data: {"error": {"message": "engine died", "code": 500}}\n\n'
    answers = iter([httpx.Response(200, headers=HEADERS, content=early), complete()])
    route = respx.post(URL).mock(side_effect=lambda _request: next(answers))
    async with LLMClient(fast_settings()) as client:
        stream = client.stream(req())
        async with stream:
            got = [piece async for piece in stream]
    assert got == ["All ", "good."]
    assert route.call_count == 2
    assert stream.result is not None
    assert stream.result.attempts == 2
