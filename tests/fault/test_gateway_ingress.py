"""The gateway's front door under a real uvicorn: hostile bodies, with and without a key.

The gateway's HTTP app (``tests.fault.gateway_http_app``: the same ``create_api``
and middleware, the bus replaced by a list) runs in its own process so its memory
can be measured alone. Before the front door, an anonymous chunked body of 200 MiB
grew that process by 400 MiB before it answered.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import psutil
import pytest

from coachbus.embedded.broker import free_port, port_open
from coachbus.settings import CoachbusSettings

# No broker: a real HTTP server and its process, nothing else.
pytestmark = [pytest.mark.unit, pytest.mark.slow]

KEY = "front-door-" + "k" * 32
LIMIT = CoachbusSettings().max_message_bytes
MiB = 1024 * 1024
PATHS = ["/v1/sessions/s/messages", "/v1/chat/completions"]


@dataclass
class Gateway:
    url: str
    port: int
    process: psutil.Process


@pytest.fixture(scope="module")
def gateway() -> Iterator[Gateway]:
    port = free_port()
    env = {**os.environ, "COACHBUS_API_KEYS": f"alice:{KEY}", "COACHBUS_ENVIRONMENT": "local"}
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "tests.fault.gateway_http_app:create",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(argv, env=env)
    try:
        give_up = time.monotonic() + 60
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None, "the gateway's HTTP app did not start"
            assert time.monotonic() < give_up, "the gateway's HTTP app did not listen"
            time.sleep(0.1)
        yield Gateway(f"http://127.0.0.1:{port}", port, psutil.Process(proc.pid))
    finally:
        proc.terminate()
        proc.wait(20)


async def _raw(gateway: Gateway, head: str, body: bytes = b"") -> int:
    """Send ``head`` (and ``body``), return the status of the answer.

    The wait is only a guard against hanging forever, not a timing being asserted.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    try:
        writer.write(head.encode() + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()


def _head(path: str, framing: str, key: str | None) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: gateway", "Content-Type: application/json", framing]
    if key:
        lines.append(f"Authorization: Bearer {key}")
    return "\r\n".join(lines) + "\r\n\r\n"


def _chunked(payload: bytes, size: int = 4096) -> bytes:
    parts = [
        f"{len(payload[i : i + size]):x}\r\n".encode() + payload[i : i + size] + b"\r\n"
        for i in range(0, len(payload), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("framing", ["Content-Length: 10000000", "Transfer-Encoding: chunked"])
async def test_no_key_gets_401_before_the_body_is_sent(
    gateway: Gateway, path: str, framing: str
) -> None:
    # Only the headers go out: an answer proves the gateway read no body first.
    assert await _raw(gateway, _head(path, framing, None)) == 401
    assert await _raw(gateway, _head(path, framing, "wrong-" + KEY)) == 401


@pytest.mark.parametrize("path", PATHS)
async def test_declared_length_over_the_limit_gets_413_unread(gateway: Gateway, path: str) -> None:
    head = _head(path, f"Content-Length: {LIMIT + 1}", KEY)
    assert await _raw(gateway, head) == 413


@pytest.mark.parametrize("path", PATHS)
async def test_chunked_body_over_the_limit_gets_413(gateway: Gateway, path: str) -> None:
    head = _head(path, "Transfer-Encoding: chunked", KEY)
    assert await _raw(gateway, head, _chunked(b" " * (LIMIT + 1))) == 413
    # At the limit the body goes through to the API (which finds it is not JSON).
    assert await _raw(gateway, head, _chunked(b" " * LIMIT)) in (400, 422)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
async def test_50_mib_chunked_leaves_memory_bounded_by_the_limit(
    gateway: Gateway, path: str, key: str | None
) -> None:
    # Warm up first: the first request of a process imports and allocates things.
    async with httpx.AsyncClient(timeout=60) as client:
        await client.post(f"{gateway.url}{path}", content=b"{}")
    before = gateway.process.memory_info().rss
    peak = before

    async def body() -> AsyncIterator[bytes]:
        nonlocal peak
        chunk = b"x" * MiB
        for i in range(50):
            if i % 5 == 0:
                peak = max(peak, gateway.process.memory_info().rss)
            yield chunk

    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    status: int | None = None
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            status = (
                await client.post(f"{gateway.url}{path}", content=body(), headers=headers)
            ).status_code
    except httpx.TransportError:
        # The gateway may close the connection while the client is still sending.
        pass
    peak = max(peak, gateway.process.memory_info().rss)
    # Generous: the limit is ~47 KiB, so this allows ~9 MiB of allocator noise.
    # Before the front door, the same 50 MiB grew the process by over 100 MiB.
    assert peak - before < 200 * LIMIT, f"RSS grew {(peak - before) / MiB:.1f} MiB"
    assert status in (None, 401 if key is None else 413)
