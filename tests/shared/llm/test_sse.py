"""The stream reader: events cut from raw bytes, however the server splits them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
import respx

from coachbus.llm import ChatRequest, LLMClient
from coachbus.llm.sse import Chunk, chunks, decode_chunk
from tests.shared.llm.conftest import SimFactory, fast_settings

pytestmark = pytest.mark.unit


def _event(content: str, **extra: object) -> bytes:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "created": 1}
    chunk["choices"] = [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    chunk.update(extra)
    return f"data: {json.dumps(chunk)}\n\n".encode()


async def _read(body_parts: list[bytes], content_type: str = "text/event-stream") -> list[Chunk]:
    async def stream() -> AsyncIterator[bytes]:
        for part in body_parts:
            yield part

    resp = httpx.Response(200, headers={"content-type": content_type}, content=stream())
    return [c async for c in chunks(resp)]


def _texts(out: list[Chunk]) -> list[str]:
    return [(choice.delta.content or "") for c in out for choice in c.choices or () if choice.delta]


async def test_events_split_at_any_byte_are_reassembled() -> None:
    body = _event("Hel") + _event("lo, ") + _event("du.") + b"data: [DONE]\n\n"
    for size in (1, 2, 7, 64, len(body)):
        parts = [body[i : i + size] for i in range(0, len(body), size)]
        assert _texts(await _read(parts)) == ["Hel", "lo, ", "du."], size


async def test_crlf_and_cr_line_endings() -> None:
    crlf = _event("a").replace(b"\n", b"\r\n") + _event("b").replace(b"\n", b"\r\n")
    # A CRLF split between two reads is still one line ending.
    cut = crlf.index(b"\r\n") + 1
    assert _texts(await _read([crlf[:cut], crlf[cut:]])) == ["a", "b"]
    cr = _event("c").replace(b"\n", b"\r")
    assert _texts(await _read([cr])) == ["c"]


async def test_comments_keepalives_fields_and_multiline_data() -> None:
    payload = json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}}]})
    half = payload.index("[")  # between tokens, not inside a string
    body = (
        b": keep-alive\n\n"
        + b"event: message\nid: 7\n"
        + f"data: {payload[:half]}\ndata: {payload[half:]}\n\n".encode()
        + b"\n\n"
        + b"data: [DONE]\n\n"
    )
    # Two data lines are joined by a newline: whitespace inside JSON, still one object.
    assert _texts(await _read([body])) == ["x"]


async def test_nothing_after_done_is_yielded_and_a_last_event_without_blank_line_is() -> None:
    after_done = _event("a") + b"data: [DONE]\n\n" + _event("never")
    assert _texts(await _read([after_done])) == ["a"]
    unterminated = _event("a") + _event("b").rstrip(b"\n")
    assert _texts(await _read([unterminated])) == ["a", "b"]


async def test_a_server_that_does_not_stream_answers_with_one_body() -> None:
    body = {"model": "m", "choices": [{"index": 0, "message": {"content": "whole"}}]}
    out = await _read([json.dumps(body).encode()], content_type="application/json")
    assert len(out) == 1 and out[0].choices and out[0].choices[0].message
    assert out[0].choices[0].message.content == "whole"


async def test_unknown_fields_are_skipped_and_bad_json_is_a_value_error() -> None:
    chunk = decode_chunk(b'{"choices": [], "usage": {"prompt_tokens": 3}, "system_fingerprint": 1}')
    assert chunk.usage == {"prompt_tokens": 3}
    with pytest.raises(ValueError, match="malformed"):
        decode_chunk(b"{not json")
    with pytest.raises(ValueError, match="Expected `array"):
        decode_chunk(b'{"choices": "nope"}')


async def test_bad_json_in_a_stream_fails_the_call_cleanly() -> None:
    with respx.mock(base_url="http://llm.test/v1") as mock:
        mock.post("/chat/completions").respond(
            200, headers={"content-type": "text/event-stream"}, content=b"data: {oops\n\n"
        )
        async with LLMClient(fast_settings()) as client:
            with pytest.raises(ValueError, match="malformed"):
                await client.chat(
                    ChatRequest(agent="coach", messages=[{"role": "user", "content": "hi"}])
                )


async def test_calls_reuse_one_connection(sim: SimFactory) -> None:
    # Reading up to [DONE] and stopping left the body unfinished, so httpx closed
    # the connection and every call paid for a new one.
    transport = httpx.AsyncHTTPTransport()
    async with sim() as url, LLMClient(fast_settings(url), transport=transport) as client:
        request = ChatRequest(agent="coach", messages=[{"role": "user", "content": "hi"}])
        seen: list[object] = []  # holding them keeps every connection's id unique
        for _ in range(4):
            await client.chat(request)
            # httpx keeps its pool private; its connection list is the only witness.
            seen.extend(transport._pool.connections)
        async for _delta in client.stream(request):
            pass
        seen.extend(transport._pool.connections)
        assert len({id(c) for c in seen}) == 1
