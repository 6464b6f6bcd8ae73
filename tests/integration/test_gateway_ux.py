"""How people meet coachbus: the OpenAI-compatible API, human review, erasure."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from aiokafka import AIOKafkaConsumer
from openai import AsyncOpenAI, AuthenticationError, NotFoundError

from coachbus.bus.state import read_latest
from coachbus.embedded.snapshot import export_snapshot
from coachbus.settings import CoachbusSettings, KafkaSettings
from tests.integration.conftest import KEYS, RunningStack, events, send

pytestmark = [pytest.mark.broker, pytest.mark.slow]


@pytest.mark.heavy
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


async def _review_of(
    client: httpx.AsyncClient, rs: RunningStack, turn_id: str
) -> dict[str, object]:
    async with asyncio.timeout(20):
        while True:
            listing = await client.get(f"{rs.url}/v1/review", headers=rs.headers("carol"))
            found = [i for i in listing.json()["items"] if i["turn_id"] == turn_id]
            if found:
                assert len(found) == 1
                return found[0]
            await asyncio.sleep(0.2)


async def test_every_crisis_reaches_a_human_once_and_the_turn_after_asks_again(
    running_stack: RunningStack,
) -> None:
    rs = running_stack
    async with httpx.AsyncClient(timeout=30) as client:
        # A plan in German colloquial form, which the old screen missed.
        crisis = await send(client, rs, "alice", "ich bring mich um, heute nacht", session="c1")
        stream = await events(client, rs, "alice", crisis)
        coach = next(d for n, d in stream if n == "coach")
        final = next(d for n, d in stream if n == "final")
        for reply in (coach, final):
            assert "0800 111 0 111" in str(reply["text"]) and "112" in str(reply["text"])
        assert (await _review_of(client, rs, crisis))["severity"] in ("critical", "high")

        # The turn after answers "are you safe right now?", and "I'm still here" is no
        # clear yes: asked again, gently, with the help lines in view, and a human
        # sees that answer too (coachbus.safety.conversation).
        after = await send(client, rs, "alice", "ok. ich bin noch da.", session="c1")
        stream = await events(client, rs, "alice", after)
        final = next(d for n, d in stream if n == "final")
        assert "0800 111 0 111" in str(final["text"])
        assert "gerade sicher" in str(final["text"])
        assert (await _review_of(client, rs, after))["severity"] == "moderate"

        # Risk cues no rule reads, no LLM configured: a direct check-in, and a human
        # sees it at moderate. (Another user: alice's next message would be read as
        # her answer to "are you safe?".)
        unsure = await send(client, rs, "hanna", "ich will einfach nicht mehr", session="c1")
        stream = await events(client, rs, "hanna", unsure)
        for name in ("coach", "final"):
            text = str(next(d for n, d in stream if n == name)["text"])
            assert "das Leben zu nehmen?" in text and "0800 111 0 111" in text
        assert (await _review_of(client, rs, unsure))["severity"] == "moderate"

    # Exactly one review record per turn on the topic, and none for the care turn.
    consumer = AIOKafkaConsumer(
        rs.prefix + "human-review",
        bootstrap_servers=rs.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=10,
    )
    await consumer.start()
    try:
        batch = await consumer.getmany(timeout_ms=3000)
    finally:
        await consumer.stop()
    turns = [json.loads(r.value)["turn_id"] for records in batch.values() for r in records]
    assert turns.count(crisis) == 1
    assert turns.count(unsure) == 1
    assert turns.count(after) == 1


async def test_erase_leaves_nothing_readable(running_stack: RunningStack, tmp_path: Path) -> None:
    rs = running_stack
    kafka = KafkaSettings(bootstrap_servers=rs.bootstrap)
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id = await send(client, rs, "alice", "I want to stop doomscrolling at night.")
        await events(client, rs, "alice", turn_id)
        before = await read_latest(kafka, f"{rs.prefix}blackboard")
        assert before["alice"][1] is not None
        async with asyncio.timeout(20):  # Synth writes memory just after the final
            while (await read_latest(kafka, f"{rs.prefix}memory")).get("alice") is None:
                await asyncio.sleep(0.2)
        erased = await client.delete(f"{rs.url}/v1/me", headers=rs.headers("alice"))
        assert erased.status_code == 202
        gone = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=rs.headers("alice"))
        assert gone.status_code == 404
        async with asyncio.timeout(20):
            while True:
                states = {
                    topic: (await read_latest(kafka, f"{rs.prefix}{topic}")).get("alice")
                    for topic in ("blackboard", "profiles", "safety", "memory")
                }
                if all(s is not None and s[1] is None for s in states.values()):
                    break
                await asyncio.sleep(0.2)
        # A snapshot taken now (what `make run` writes on stop) holds nothing of her.
        snapshot = tmp_path / "state.jsonl"
        settings = CoachbusSettings(topic_prefix=rs.prefix, partitions=3)
        await export_snapshot(settings, kafka, snapshot)
        rows = [json.loads(line) for line in snapshot.read_text().splitlines()[1:]]
        assert rows, "the snapshot should hold the other users' state"
        assert all(row["key"] != "alice" for row in rows)
        # A new message after erasure starts from nothing.
        turn_id = await send(client, rs, "alice", "Hello again.")
        stream = await events(client, rs, "alice", turn_id)
        shadow = next(d for n, d in stream if n == "agent" and d["agent"] == "shadow")
        assert shadow["payload"]["blackboard_version"] == 1


async def test_cli_chat_against_the_running_stack(running_stack: RunningStack) -> None:
    import sys

    rs = running_stack
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coachbus.cli", "chat",
        "--url", rs.url, "--key", KEYS["bob"], "--session", "cli-test",
        "I want to cook at home three evenings a week.",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    text = out.decode()
    assert proc.returncode == 0, err.decode()[-2000:]
    # The Coach's immediate reply first, then the synthesis.
    assert text.index("coach ›") < text.index("coachbus ›")
    assert "agents]" in text


async def test_cors_is_off_unless_configured(running_stack: RunningStack) -> None:
    rs = running_stack
    async with httpx.AsyncClient(timeout=10) as client:
        preflight = await client.options(
            f"{rs.url}/v1/sessions/s1/messages",
            headers={
                "Origin": "https://evil.example",
                "Access-Control-Request-Method": "POST",
            },
        )
    assert "access-control-allow-origin" not in preflight.headers
