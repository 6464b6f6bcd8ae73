"""The OpenAI-compatible endpoint and a reviewer's answer: a completion cannot be
pushed to later, so an answer the client does not show yet opens the next one."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from coachbus.contracts import Reply, UserMessage, new_turn_id
from coachbus.contracts.payloads import AGENTS
from coachbus.settings import ApiKey, CoachbusSettings
from services.gateway.auth import KeyRing, RateLimits
from services.gateway.openai_api import create_openai_router
from services.gateway.review_content import shipped
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit

KEY = "bob-key-0123456789abcdef0123456789"


def _app(store: TurnStore) -> FastAPI:
    settings = CoachbusSettings()
    ring = KeyRing([ApiKey(user_id="bob", key=SecretStr(KEY))])

    async def publish(message: object) -> None:
        # The pipeline, answering at once.
        assert isinstance(message, UserMessage)
        final = Reply(
            turn_id=message.turn_id,
            session_id=message.session_id,
            user_id=message.user_id,
            kind="final",
            text="Synthesis.",
            degraded=True,
            missing_agents=list(AGENTS),
        )
        asyncio.get_running_loop().call_soon(asyncio.ensure_future, store.add_reply(final))

    app = FastAPI()
    app.include_router(create_openai_router(settings, ring, store, publish, RateLimits(100)))
    return app


async def test_an_answer_the_transcript_lacks_opens_the_next_completion() -> None:
    store = TurnStore()
    earlier = new_turn_id()
    store.open(earlier, "bob", "s1", sent=True)
    answer = Reply(
        turn_id=earlier, session_id="s1", user_id="bob", kind="human", text="Carol here."
    )
    await store.add_reply(answer)
    headers = {"Authorization": f"Bearer {KEY}", "X-Session-Id": "s1"}
    body = {"model": "coachbus", "messages": [{"role": "user", "content": "I'm still here."}]}
    transport = httpx.ASGITransport(app=_app(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        first = await client.post("/v1/chat/completions", json=body, headers=headers)
        content = first.json()["choices"][0]["message"]["content"]
        intro = shipped().relayed.get("en", "formal")
        assert content.startswith(f"{intro}\n\nCarol here.")
        assert content.endswith("Synthesis.")
        # The client now shows it: the next completion does not relay it again.
        body["messages"] = [
            {"role": "user", "content": "I'm still here."},
            {"role": "assistant", "content": content},
            {"role": "user", "content": "thanks"},
        ]
        second = await client.post("/v1/chat/completions", json=body, headers=headers)
        assert second.json()["choices"][0]["message"]["content"] == "Synthesis."
        # Another session's completion never carries it.
        other = {**headers, "X-Session-Id": "s2"}
        body["messages"] = [{"role": "user", "content": "hi"}]
        third = await client.post("/v1/chat/completions", json=body, headers=other)
        assert third.json()["choices"][0]["message"]["content"] == "Synthesis."


async def test_streamed_the_answer_is_the_first_content() -> None:
    store = TurnStore()
    earlier = new_turn_id()
    store.open(earlier, "bob", "s1", sent=True)
    await store.add_reply(
        Reply(turn_id=earlier, session_id="s1", user_id="bob", kind="human", text="Rita here.")
    )
    headers = {"Authorization": f"Bearer {KEY}", "X-Session-Id": "s1"}
    body = {
        "model": "coachbus",
        "stream": True,
        "messages": [{"role": "user", "content": "hello again"}],
    }
    transport = httpx.ASGITransport(app=_app(store))
    contents: list[str] = []
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://gw") as client,
        client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    contents.append(delta["content"])
    intro = shipped().relayed.get("en", "formal")
    assert contents[0].startswith(f"{intro}\n\nRita here.")
    assert "".join(contents).endswith("Synthesis.")
