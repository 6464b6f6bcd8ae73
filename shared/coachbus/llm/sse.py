"""Reading an OpenAI-compatible chat-completion stream cheaply.

A streamed completion is one server-sent event per token, so whatever is done
per event is done hundreds of times per call, by every agent, on every turn.
Profiling the pipeline showed the stream reader as the largest single cost of a
turn, so this module keeps the per-event work small:

* events are cut out of the raw bytes (no line-by-line text decoding);
* each event's JSON is decoded by msgspec straight into the few fields the
  client reads (everything else in a chunk is skipped by the decoder);
* after ``[DONE]`` the rest of the body is still read, so the connection goes
  back to the pool instead of being closed: an early return left every call
  paying for a new TCP connection.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx
import msgspec


class Delta(msgspec.Struct, omit_defaults=True):
    content: str | None = None
    # vLLM's reasoning parsers put Qwen3's thinking here; some servers say "reasoning".
    reasoning_content: str | None = None
    reasoning: str | None = None


class Choice(msgspec.Struct, omit_defaults=True):
    index: int = 0
    delta: Delta | None = None
    # A server that ignores ``stream`` answers with whole messages instead of deltas.
    message: Delta | None = None
    finish_reason: str | None = None


class Chunk(msgspec.Struct, omit_defaults=True):
    """The fields of a ``chat.completion(.chunk)`` object the client uses."""

    choices: list[Choice] | None = None
    usage: dict[str, Any] | None = None
    model: str | None = None
    # An error event mid-stream (vLLM sends ``{"error": {...}}``); a string on some servers.
    error: Any = None


_decoder = msgspec.json.Decoder(Chunk)


def decode_chunk(payload: bytes) -> Chunk:
    """One event's JSON; a ``ValueError`` (msgspec's DecodeError) if it is not a chunk."""
    return _decoder.decode(payload)


_DONE = b"[DONE]"


def _data_of(event: bytes) -> bytes | None:
    """The ``data`` of one event (several data lines are joined by newlines)."""
    if event.startswith(b"data:") and b"\n" not in event:
        # The common case: a single data line.
        data = event[5:]
        return data[1:] if data.startswith(b" ") else data
    parts = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:]
            parts.append(data[1:] if data.startswith(b" ") else data)
        # comments (":"), "event:", "id:" and "retry:" fields carry nothing we use
    return b"\n".join(parts) if parts else None


async def chunks(resp: httpx.Response) -> AsyncGenerator[Chunk, None]:
    """The completion's chunks: one per event of a stream, or the one JSON body of a
    server that did not stream. Ends at ``[DONE]`` or at the end of the body."""
    if "text/event-stream" not in resp.headers.get("content-type", ""):
        yield decode_chunk(await resp.aread())
        return
    buffer = b""
    done = False
    async for raw in resp.aiter_bytes():
        if done:
            continue  # drain what follows [DONE] so the connection can be reused
        if b"\r" in raw or buffer.endswith(b"\r"):
            # Lines may end in CRLF or CR (the SSE spec allows all three).
            buffer = (buffer + raw).replace(b"\r\n", b"\n")
            if buffer.endswith(b"\r"):
                continue  # maybe the first half of a CRLF split across reads
            buffer = buffer.replace(b"\r", b"\n")
        else:
            buffer += raw
        while True:
            end = buffer.find(b"\n\n")
            if end < 0:
                break
            event, buffer = buffer[:end], buffer[end + 2 :]
            data = _data_of(event)
            if data is None or not data.strip():
                continue  # a keep-alive or a comment
            if data.strip() == _DONE:
                done = True
                break
            yield decode_chunk(data)
    if not done:
        data = _data_of(buffer.strip(b"\r\n"))
        if data is not None and data.strip() and data.strip() != _DONE:
            yield decode_chunk(data)
