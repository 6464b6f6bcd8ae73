"""How people meet coachbus: the OpenAI-compatible API, human review, erasure."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from openai import AsyncOpenAI, AuthenticationError, NotFoundError

from coachbus.bus.state import read_latest
from coachbus.settings import KafkaSettings
from tests.integration.conftest import KEYS, RunningStack, events, send

pytestmark = [pytest.mark.broker, pytest.mark.slow]


async def test_official_openai_client_streamed_and_not(running_stack: RunningStack) -> None:
    rs = running_stack
    client = AsyncOpenAI(base_url=f"{rs.url}/v1", api_key=KEYS["alice"], timeout=60)
    models = await client.models.list()
    assert [m.id for m in models.data] == ["coachbus"]

    completion = await client.chat.completions.create(
        model="coachbus",
        messages=[{"role": "user", "content": "I want to get back into reading before bed."}],
        user="oa-session-1",
    )
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].finish_reason == "stop"
    assert len(completion.choices[0].message.content or "") > 20

    stream = await client.chat.completions.create(
        model="coachbus",
        messages=[{"role": "user", "content": "Ich möchte wieder mehr lesen."}],
        stream=True,
        extra_headers={"X-Session-Id": "oa-session-2"},
    )
    parts: list[str] = []
    finishes: list[str | None] = []
    async for chunk in stream:
        parts.append(chunk.choices[0].delta.content or "")
        finishes.append(chunk.choices[0].finish_reason)
    text = "".join(parts)
    # The Coach's immediate reply comes first, then the synthesis, clearly separated.
    coach_part, _, final_part = text.partition("\n\n---\n\n")
    assert coach_part.strip()
    assert final_part.strip()
    assert finishes[-1] == "stop"

    with pytest.raises(AuthenticationError):
        await AsyncOpenAI(base_url=f"{rs.url}/v1", api_key="wrong").models.list()
    with pytest.raises(NotFoundError):
        await client.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "hi"}]
        )


async def test_crisis_reaches_reviewer_and_answer_reaches_only_the_user(
    running_stack: RunningStack,
) -> None:
    rs = running_stack
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id = await send(
            client, rs, "bob", "I can't go on anymore, I keep thinking about ending my life."
        )
        stream = await events(client, rs, "bob", turn_id)
        coach = next(data for name, data in stream if name == "coach")
        assert coach["text"]
        # Reviewer sees the escalation; others get 403.
        assert (
            await client.get(f"{rs.url}/v1/review", headers=rs.headers("alice"))
        ).status_code == 403
        items: list[dict[str, object]] = []
        async with asyncio.timeout(20):
            while not any(i["turn_id"] == turn_id for i in items):
                listing = await client.get(f"{rs.url}/v1/review", headers=rs.headers("carol"))
                assert listing.status_code == 200
                items = listing.json()["items"]
                await asyncio.sleep(0.2)
        item = next(i for i in items if i["turn_id"] == turn_id)
        assert item["severity"] == "critical"
        answer = await client.post(
            f"{rs.url}/v1/review/{turn_id}",
            json={"text": "This is Carol from the support team. I'm here — can we talk now?"},
            headers=rs.headers("carol"),
        )
        assert answer.status_code == 202
        human: list[dict[str, object]] = []
        async with asyncio.timeout(20):
            while not human:
                turn = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=rs.headers("bob"))
                human = turn.json()["human"]
                await asyncio.sleep(0.1)
        assert human[0]["kind"] == "human"
        assert "Carol" in str(human[0]["text"])
        hidden = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=rs.headers("alice"))
        assert hidden.status_code == 404
        # Answered reviews leave the queue.
        again = await client.post(
            f"{rs.url}/v1/review/{turn_id}", json={"text": "again"}, headers=rs.headers("carol")
        )
        assert again.status_code == 404


async def test_erase_leaves_nothing_readable(running_stack: RunningStack) -> None:
    rs = running_stack
    kafka = KafkaSettings(bootstrap_servers=rs.bootstrap)
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id = await send(client, rs, "alice", "I want to stop doomscrolling at night.")
        await events(client, rs, "alice", turn_id)
        before = await read_latest(kafka, f"{rs.prefix}blackboard")
        assert before["alice"][1] is not None
        erased = await client.delete(f"{rs.url}/v1/me", headers=rs.headers("alice"))
        assert erased.status_code == 202
        gone = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=rs.headers("alice"))
        assert gone.status_code == 404
        async with asyncio.timeout(20):
            while True:
                states = {
                    topic: (await read_latest(kafka, f"{rs.prefix}{topic}")).get("alice")
                    for topic in ("blackboard", "profiles", "safety")
                }
                if all(s is not None and s[1] is None for s in states.values()):
                    break
                await asyncio.sleep(0.2)
        # A new message after erasure starts from nothing.
        turn_id = await send(client, rs, "alice", "Hello again.")
        stream = await events(client, rs, "alice", turn_id)
        shadow = next(d for n, d in stream if n == "agent" and d["agent"] == "shadow")
        assert shadow["payload"]["blackboard_version"] == 1
