"""OpenAI-compatible surface, so the official client and chat front-ends (Open WebUI…)
work unchanged: ``GET /v1/models`` and ``POST /v1/chat/completions``.

coachbus keeps its own memory of a user (blackboard, profile, summaries), so only
the last user message of the request is sent into the pipeline; earlier messages
in the request are the client's transcript, not our state.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from coachbus.contracts import EraseRequest, Reply, UserMessage
from coachbus.contracts.events import language_and_address
from coachbus.settings import CoachbusSettings
from coachbus.text import Phrase
from services.gateway import review_content
from services.gateway.auth import KeyRing, Principal, RateLimits, StreamSlots
from services.gateway.ingress import fits_the_bus
from services.gateway.turns import TurnStore

MODEL_ID = "coachbus"
# Between the Coach's immediate reply and the synthesis in a streamed answer (and
# before a final that does not continue the sentences streamed: see ``_rest``).
SEPARATOR = "\n\n---\n\n"


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        if isinstance(self.content, list):
            return "\n".join(
                str(part.get("text", "")) for part in self.content if part.get("type") == "text"
            )
        return ""


class ChatRequest(BaseModel):
    # Unknown OpenAI parameters (temperature, top_p…) are accepted and ignored:
    # the pipeline decides its own sampling per agent.
    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    user: str | None = Field(default=None, max_length=128)


def openai_error(
    status: int, message: str, kind: str, code: str | None = None, param: str | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": param, "code": code}},
        status_code=status,
    )


def create_openai_router(
    settings: CoachbusSettings,
    keys: KeyRing,
    store: TurnStore,
    publish: Callable[[UserMessage | EraseRequest], Awaitable[None]],
    limits: RateLimits,
    streams: StreamSlots | None = None,
    relayed: Phrase | None = None,
) -> APIRouter:
    router = APIRouter()
    intro = relayed or review_content.shipped().relayed

    def relay(user_id: str, session_id: str, messages: list[ChatMessage], msg: UserMessage) -> str:
        """Reviewers' answers in this session the client has not shown yet, each after
        the line that says a person wrote it. A completion cannot be pushed to later,
        so an answer that came after a completion ended opens the next one; what the
        client already shows is in the request's own transcript (the assistant
        messages), so any replica knows without keeping state, and nothing is relayed
        twice."""
        shown = "\n".join(m.text() for m in messages if m.role == "assistant")
        answers = [
            h.text
            for view in reversed(store.turns_of(user_id))  # oldest first
            if view.session_id == session_id
            for h in view.human
            if h.text not in shown
        ]
        line = intro.get(msg.language, msg.address or "formal")
        return "".join(f"{line}\n\n{text}{SEPARATOR}" for text in answers)

    wait_s = settings.turn_deadline_ms / 1000 * 2 + 10

    def caller(authorization: str | None) -> Principal | None:
        return keys.resolve(authorization)

    @router.get("/v1/models")
    async def models(authorization: str | None = Header(default=None)) -> JSONResponse:
        if caller(authorization) is None:
            return openai_error(401, "Invalid API key.", "invalid_request_error", "invalid_api_key")
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "coachbus"}],
            }
        )

    @router.post("/v1/chat/completions", response_model=None)
    async def chat(
        request: Request,
        authorization: str | None = Header(default=None),
        x_session_id: str | None = Header(default=None, max_length=128),
    ) -> JSONResponse | StreamingResponse:
        """One turn through the pipeline, answered as an OpenAI chat completion.

        Not streamed: the synthesis (the final reply). Streamed: one growing text,
        the Coach's reply, then ``\\n\\n---\\n\\n``, then the synthesis sentence by
        sentence as Synth writes it and, with the final, only what the sentences
        did not show (never repeated); ``finish_reason`` ``stop``, or ``length``
        when no final came in time. A reviewer's answer in the session that the
        request's transcript does not show yet opens the content, introduced as a
        person's (a completion cannot be pushed to later; ``X-Coachbus-Turn-Id``
        and ``GET /v1/turns/{id}`` have it at once). See docs/streaming.md.
        """
        principal = caller(authorization)
        if principal is None:
            return openai_error(401, "Invalid API key.", "invalid_request_error", "invalid_api_key")
        retry_after = limits.take(principal.user_id)
        if retry_after is not None:
            response = openai_error(
                429, "Rate limit reached; slow down.", "rate_limit_error", "rate_limit_exceeded"
            )
            response.headers["Retry-After"] = str(max(1, round(retry_after)))
            return response
        try:
            body = ChatRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            first = exc.errors()[0]
            return openai_error(
                400,
                f"Invalid request: {first['msg']}",
                "invalid_request_error",
                param=".".join(str(p) for p in first["loc"]) or None,
            )
        if body.model != MODEL_ID:
            return openai_error(
                404,
                f"The model '{body.model}' does not exist; use '{MODEL_ID}'.",
                "invalid_request_error",
                "model_not_found",
                "model",
            )
        user_turns = [m for m in body.messages if m.role == "user" and m.text().strip()]
        if not user_turns:
            return openai_error(
                400,
                "The request has no user message.",
                "invalid_request_error",
                param="messages",
            )
        text = user_turns[-1].text()
        if len(text) > settings.max_message_chars:
            return openai_error(
                413,
                f"The message exceeds {settings.max_message_chars} characters.",
                "invalid_request_error",
                "message_too_long",
                "messages",
            )
        session = x_session_id or body.user or _default_session(principal.user_id)
        # The conversation so far is in the request: its language is what a short
        # last message ("ok") keeps.
        history = "\n".join(m.text() for m in user_turns[:-1])
        message = UserMessage.create(
            user_id=principal.user_id,
            session_id=session[:128],
            text=text,
            deadline_ms=settings.turn_deadline_ms,
            max_tokens=settings.turn_token_budget,
            wall_clock_ms=settings.turn_wall_clock_ms,
            earlier=language_and_address(history)[0] if history.strip() else None,
        )
        if not fits_the_bus(message, settings.max_message_bytes):
            # Escapes can make the record longer than the request: the agents would
            # dead-letter it, so the caller hears it now instead.
            return openai_error(
                413,
                f"The message encodes to over {settings.max_message_bytes} bytes.",
                "invalid_request_error",
                "message_too_long",
                "messages",
            )
        # A stream's slot is taken before the message goes out: a refused stream
        # publishes nothing.
        slots_held = streams if body.stream else None
        if slots_held is not None and not slots_held.acquire(principal.user_id):
            return openai_error(
                429,
                f"{settings.max_streams_per_user} streams already open for this key.",
                "rate_limit_error",
                "too_many_streams",
            )
        try:
            view = store.open(message.turn_id, principal.user_id, message.session_id, sent=True)
            await publish(message)
        except BaseException:
            if slots_held is not None:
                slots_held.release(principal.user_id)
            raise
        relayed_text = relay(principal.user_id, message.session_id, body.messages, message)
        completion_id = f"chatcmpl-{message.turn_id}"
        created = int(time.time())

        if not body.stream:
            final = await view.wait_for("final", wait_s)
            if final is None:
                return openai_error(
                    504, "The pipeline did not answer in time.", "server_error", "timeout"
                )
            return JSONResponse(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": MODEL_ID,
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": relayed_text + final.text,
                            },
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": _usage(final.usage.prompt_tokens, final.usage.completion_tokens),
                    "coachbus": {
                        "turn_id": message.turn_id,
                        "degraded": final.degraded,
                        "missing_agents": final.missing_agents,
                    },
                },
                headers={"X-Coachbus-Turn-Id": message.turn_id},
            )

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": MODEL_ID,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(payload)}\n\n".encode()

        slots, user_id = slots_held, principal.user_id

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for piece in _chunks():
                    yield piece
            finally:
                if slots is not None:
                    slots.release(user_id)

        async def _chunks() -> AsyncIterator[bytes]:
            # One text grows: the Coach's reply, the separator, then the synthesis
            # sentence by sentence as Synth streams it (final_delta), then what of
            # the final is not shown yet. A client only ever appends, so the
            # synthesis is never sent twice.
            yield chunk({"role": "assistant", "content": ""})
            if relayed_text:
                yield chunk({"content": relayed_text})
            loop = asyncio.get_running_loop()
            end = loop.time() + wait_s
            sent, coach_shown, synthesis = 0, False, ""
            while loop.time() < end:
                pending = await view.events_after(sent, end - loop.time())
                sent += len(pending)
                for event, data in pending:
                    if event == "coach" and not synthesis and not coach_shown:
                        # After the synthesis began, a late Coach reply is left out.
                        coach_shown = True
                        yield chunk({"content": Reply.model_validate_json(data).text + SEPARATOR})
                    elif event == "final_delta":
                        piece = Reply.model_validate_json(data).text
                        synthesis += piece
                        yield chunk({"content": piece})
                    elif event == "final":
                        text = Reply.model_validate_json(data).text
                        yield chunk({"content": _rest(text, synthesis)})
                        yield chunk({}, "stop")
                        yield b"data: [DONE]\n\n"
                        return
            yield chunk({"content": "(no synthesized reply in time)"}, "length")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"X-Coachbus-Turn-Id": message.turn_id, "Cache-Control": "no-cache"},
        )

    return router


def _rest(final: str, streamed: str) -> str:
    """What of the final text a client that was streamed ``streamed`` lacks.

    Normally the final starts with the streamed sentences; if it does not (a Synth
    that restarted mid-stream wrote another reply), the final follows whole after
    a separator rather than being spliced onto text it does not continue."""
    if final.startswith(streamed):
        return final[len(streamed) :]
    return SEPARATOR + final


def _default_session(user_id: str) -> str:
    # One running session per user and day when the client names none.
    day = time.strftime("%Y-%m-%d", time.gmtime())
    return "oa-" + hashlib.sha256(f"{user_id}:{day}".encode()).hexdigest()[:16]


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
