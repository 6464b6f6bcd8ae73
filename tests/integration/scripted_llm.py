"""An OpenAI-compatible streaming server that writes the text a test chose.

The simulator (``coachbus llm-sim``) writes varied sample prose: a test cannot
make it write a blocked step or an artefact in its third sentence. This server
answers every chat completion by streaming the script whose marker appears in
the request's messages (a word the test put in the user's message, which every
agent's prompt carries), piece by piece, optionally stalling after a number of
pieces, so a test controls exactly what Synth streams and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fault.conftest import running, stack_env
from tests.integration.conftest import RunningStack
from tests.shared.llm.simserver import serve_app

MODELS = ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B")
_PIECES = re.compile(r"\s?\S+|\s+")


@dataclass(slots=True)
class Script:
    text: str
    piece_s: float = 0.02  # between pieces
    stall_after: int | None = None  # pieces sent before the stall
    stall_s: float = 0.0


@dataclass(slots=True)
class ScriptedLLM:
    scripts: dict[str, Script]
    default: Script
    requests: list[str] = field(default_factory=list)  # every request's messages, joined

    def pick(self, messages: list[dict[str, Any]]) -> Script:
        # Anywhere in the prompt: a test gives each scenario a user of its own, so
        # no other scenario's marker is in that user's conversation memory.
        joined = "\n".join(str(m.get("content", "")) for m in messages)
        self.requests.append(joined)
        for marker, script in self.scripts.items():
            if marker in joined:
                return script
        return self.default

    async def models(self, _request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]}
        )

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        script = self.pick(body["messages"])
        model = body.get("model", MODELS[0])
        pieces = _PIECES.findall(script.text)
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": "chatcmpl-x",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": script.text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": _usage(pieces),
                }
            )
        return StreamingResponse(
            self._stream(script, pieces, model, body), media_type="text/event-stream"
        )

    async def _stream(
        self, script: Script, pieces: list[str], model: str, body: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return f"data: {json.dumps(data)}\n\n".encode()

        yield chunk({"role": "assistant", "content": ""})
        for i, piece in enumerate(pieces):
            if script.stall_after is not None and i == script.stall_after:
                await asyncio.sleep(script.stall_s)
            await asyncio.sleep(script.piece_s)
            yield chunk({"content": piece})
        yield chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            data = {"id": cid, "object": "chat.completion.chunk", "choices": []}
            yield f"data: {json.dumps({**data, 'usage': _usage(pieces)})}\n\n".encode()
        yield b"data: [DONE]\n\n"


def _usage(pieces: list[str]) -> dict[str, int]:
    return {
        "prompt_tokens": 100,
        "completion_tokens": len(pieces),
        "total_tokens": 100 + len(pieces),
    }


@contextlib.asynccontextmanager
async def serve(llm: ScriptedLLM) -> AsyncIterator[str]:
    """Serve ``llm`` in this event loop on a free port; yields its ``/v1`` base URL."""
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", llm.chat, methods=["POST"]),
            Route("/v1/models", llm.models, methods=["GET"]),
        ]
    )
    async with serve_app(app) as url:
        yield url


@contextlib.asynccontextmanager
async def scripted_stack(
    kafka_bootstrap: str,
    folder: Path,
    llm: ScriptedLLM,
    *,
    name: str,
    keys: dict[str, str],
    policy: Path,
) -> AsyncIterator[RunningStack]:
    """The seven processes on the embedded broker (topics of their own, prefixed by
    ``name``), thinking through ``llm`` under ``policy``, one API key per user."""
    async with serve(llm) as base_url:
        env = stack_env(
            f"{name}{uuid.uuid4().hex[:8]}.",
            COACHBUS_API_KEYS=",".join(f"{u}:{k}" for u, k in keys.items()),
            COACHBUS_LLM_BASE_URL=base_url,
            COACHBUS_LLM_POLICY_FILE=str(policy),
            COACHBUS_LLM_RETRY_WAIT_INITIAL_S="0.01",
            COACHBUS_LLM_RETRY_WAIT_JITTER_S="0",
        )
        async with running(kafka_bootstrap, folder, env) as rs:
            yield rs


async def post_turn(rs: RunningStack, key: str, session: str, text: str) -> bytes:
    """Post ``text`` with the user's ``key``; the turn id, as the records carry it."""
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            f"{rs.url}/v1/sessions/{session}/messages",
            json={"text": text},
            headers={"Authorization": f"Bearer {key}"},
        )
    assert response.status_code == 202, response.text
    return str(response.json()["turn_id"]).encode()
