"""The gateway's front door: who is calling, then how much they send, before any parsing.

A pure ASGI middleware, so nothing reads the body before it has decided:

1. An authenticated route (everything under ``/v1/``) without a known key gets its
   401 from the headers alone, before one body byte is read, so an anonymous client
   cannot make the gateway buffer anything (what it still sends is discarded, within
   a bound, so that its client can read the answer).
2. The body is read here, counted as it arrives whatever the framing
   (``Content-Length`` or chunked), and the request gets its 413 as soon as the
   count passes the limit; a declared length over it is refused unread. The app
   behind sees the body already in hand, so the memory one request can take is
   bounded by the limit (plus one chunk of the server's read buffer).

The limit is the one the agents apply to a user-messages record
(``CoachbusSettings.max_message_bytes``): a body the agents would dead-letter is
never accepted, and :func:`fits_the_bus` checks the record itself before it is
published (JSON escapes can make a record longer than the body that carried it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from http import HTTPStatus
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coachbus.bus.codec import encode
from coachbus.contracts import UserMessage
from services.gateway.auth import KeyRing

AUTHENTICATED_PREFIX = "/v1/"
# Public safety information (services/gateway/web.py): a person in crisis must see the
# help lines even when their key fails.
PUBLIC_PATHS = frozenset({"/v1/help-lines"})
# The OpenAI-compatible routes answer in OpenAI's error shape, so its clients show
# the message; everything else in RFC 9457 problem details.
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})
# What the front door reads and throws away of a refused body so that the client
# can read the refusal (see _drain): a bound on bytes and on time.
DRAIN_BYTES = 8 * 1024 * 1024
DRAIN_S = 5.0


def fits_the_bus(message: UserMessage, limit: int) -> bool:
    """Whether the record the agents will decode stays within their byte limit."""
    return len(encode(message)) <= limit


class Ingress:
    """Authenticate from the headers, then read the body against a byte limit."""

    def __init__(self, app: ASGIApp, *, keys: KeyRing, limit: int) -> None:
        self.app = app
        self.keys = keys
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        # A CORS preflight carries no credentials by design (and no body).
        if (
            path.startswith(AUTHENTICATED_PREFIX)
            and path not in PUBLIC_PATHS
            and scope["method"] != "OPTIONS"
            and self.keys.resolve(_header(scope, b"authorization")) is None
        ):
            await _unauthorized(path, send, receive)
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(path, self.limit, send, receive)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; there is no one to answer
            body += message.get("body", b"")
            if len(body) > self.limit:
                more = receive if message.get("more_body", False) else None
                await _too_large(path, self.limit, send, more)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)


async def _drain(receive: Receive) -> None:
    """Discard what is left of a refused body, within a bound, after the answer.

    Most HTTP clients send the whole body before they read a response; a server
    that closes mid-upload hands them a connection reset instead of the 401 or 413
    it wrote. The answer's bytes are already on the wire (only its end is held back:
    a server may close once a response is complete), nothing is kept (memory stays
    flat), and past ``DRAIN_BYTES`` or ``DRAIN_S`` the connection is closed anyway,
    so an abusive upload costs at most that much reading.
    """
    taken = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_S):
            while taken <= DRAIN_BYTES:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                taken += len(message.get("body", b""))
                if not message.get("more_body", False):
                    return


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body in one message, then the server's own receive (disconnects)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _unauthorized(path: str, send: Send, receive: Receive) -> None:
    if path in OPENAI_PATHS:
        body: dict[str, Any] = _openai_error("Invalid API key.", "invalid_api_key")
        media = "application/json"
    else:
        body = _problem(401, "missing or unknown API key")
        media = "application/problem+json"
    # The body is never parsed, only discarded: the connection cannot carry another request.
    closing = [(b"www-authenticate", b"Bearer"), (b"connection", b"close")]
    await _respond(send, 401, body, media, closing, receive)


async def _too_large(path: str, limit: int, send: Send, receive: Receive | None) -> None:
    if path in OPENAI_PATHS:
        body: dict[str, Any] = _openai_error(
            f"The request body exceeds {limit} bytes.", "request_too_large"
        )
        media = "application/json"
    else:
        body = _problem(413, f"request body over {limit} bytes")
        media = "application/problem+json"
    await _respond(send, 413, body, media, [(b"connection", b"close")], receive)


def _problem(status: int, detail: str) -> dict[str, Any]:
    title = HTTPStatus(status).phrase
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}


def _openai_error(message: str, code: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}
    }


async def _respond(
    send: Send,
    status: int,
    body: dict[str, Any],
    media: str,
    extra: list[tuple[bytes, bytes]],
    drain: Receive | None,
) -> None:
    """Send the whole answer; with ``drain``, discard the rest of the request body
    before the response is marked complete (see :func:`_drain`)."""
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", media.encode()),
        (b"content-length", str(len(payload)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload, "more_body": drain is not None})
    if drain is not None:
        await _drain(drain)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
