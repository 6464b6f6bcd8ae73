"""The gateway's side of Synth's streamed synthesis: the turn store forwards
``final_delta`` pieces in order until the final, the SSE stream names them
``final_delta``, the OpenAI-compatible stream appends them and never repeats them
at the end, and the feed takes them from ``replies`` only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from aiokafka import TopicPartition
from pydantic import SecretStr

from coachbus.bus.codec import encode
from coachbus.contracts import Reply, UserMessage
from coachbus.settings import ApiKey, CoachbusSettings, KafkaSettings
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.feed import ReplyFeed
from services.gateway.openai_api import SEPARATOR
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit

KEY = "k" * 40
USER = "alice"
SENTENCES = ["Thanks for telling me.", " Tidying feels safer than writing.", " Which day suits?"]


def _reply(turn: str, kind: str, text: str, seq: int | None = None, **extra: Any) -> Reply:
    fields = {"turn_id": turn, "session_id": "s", "user_id": USER, "kind": kind, "text": text}
    return Reply.model_validate({**fields, "seq": seq, **extra})


def _script(final: str, sentences: list[str] = SENTENCES) -> Callable[[str], list[Reply]]:
    """The replies of a turn, as the feed would add them: a coach reply, the
    synthesis's pieces (with a duplicate and one out of order), the final, then a
    piece that comes too late."""

    def replies(turn: str) -> list[Reply]:
        out = [_reply(turn, "coach", "First thoughts.")]
        for seq, text in enumerate(sentences):
            out.append(_reply(turn, "final_delta", text, seq))
            if seq == 0:
                out.append(_reply(turn, "final_delta", text, 0))  # redelivered
                out.append(_reply(turn, "final_delta", "Out of order.", 5))
        # Degraded with every agent missing: the store shows the final at once.
        out.append(_reply(turn, "final", final, degraded=True, missing_agents=list(_AGENTS)))
        out.append(_reply(turn, "final_delta", " Too late.", len(sentences)))
        return out

    return replies


_AGENTS = ("shadow", "persona", "plasticity", "stability", "coach")


def _app(replies: Callable[[str], list[Reply]]) -> tuple[httpx.AsyncClient, TurnStore]:
    store = TurnStore()

    async def feed(turn: str) -> None:
        for reply in replies(turn):
            await asyncio.sleep(0.001)
            await store.add_reply(reply)

    async def publish(message: object) -> None:
        if isinstance(message, UserMessage):
            asyncio.get_running_loop().create_task(feed(message.turn_id))

    ring = KeyRing([ApiKey(user_id=USER, key=SecretStr(KEY))])
    api = create_api(CoachbusSettings(), ring, store, publish, ReviewQueue(), publish)
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api),
        base_url="http://gateway",
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    return client, store


def _sse(body: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in body.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines and "data" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_the_sse_stream_forwards_final_deltas_in_order_then_the_final() -> None:
    final = "".join(SENTENCES) + " And the rest."
    client, _store = _app(_script(final))
    async with client:
        turn = (await client.post("/v1/sessions/s/messages", json={"text": "hi"})).json()
        events = _sse((await client.get(turn["events"])).text)
    names = [e for e, _ in events]
    assert names == ["coach", "final_delta", "final_delta", "final_delta", "final"]
    deltas = [d for e, d in events if e == "final_delta"]
    assert [d["seq"] for d in deltas] == [0, 1, 2]
    assert "".join(d["text"] for d in deltas) == "".join(SENTENCES)
    assert events[-1][1]["text"] == final


async def _openai_stream(client: httpx.AsyncClient) -> list[str]:
    body = {"model": "coachbus", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    contents = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[6:])["choices"][0]
                if choice["delta"].get("content"):
                    contents.append(choice["delta"]["content"])
            elif line.startswith("data: "):
                contents.append(line[6:])
    return contents


async def test_the_openai_stream_appends_the_synthesis_and_never_repeats_it() -> None:
    final = "".join(SENTENCES) + " And the rest."
    client, _store = _app(_script(final))
    async with client:
        contents = await _openai_stream(client)
    assert contents == [
        "First thoughts." + SEPARATOR,
        *SENTENCES,
        " And the rest.",  # only what the pieces did not show
        "[DONE]",
    ]
    assert "".join(contents[:-1]) == "First thoughts." + SEPARATOR + final


async def test_a_final_that_does_not_continue_the_stream_follows_whole() -> None:
    # A Synth that restarted mid-stream wrote another reply: it is not spliced on.
    client, _store = _app(_script("Another reply altogether."))
    async with client:
        contents = await _openai_stream(client)
    assert contents[-2] == SEPARATOR + "Another reply altogether."


async def test_the_store_shows_one_stream_per_turn_and_nothing_after_the_final() -> None:
    store = TurnStore()
    view = store.open("t1", USER, "s")
    await store.add_reply(_reply("t1", "final_delta", "One.", 0))
    await store.add_reply(_reply("t1", "final_delta", " Two.", 1))
    await store.add_reply(_reply("t1", "final_delta", "Again.", 0))  # a second stream
    await store.add_reply(_reply("t1", "final_delta", " Three.", 3))  # a gap
    await store.add_reply(
        _reply("t1", "final", "One. Two.", degraded=True, missing_agents=["coach"])
    )
    await store.add_reply(_reply("t1", "final_delta", " Late.", 2))
    shown = [json.loads(d)["text"] for e, d in view.events if e == "final_delta"]
    assert shown == ["One.", " Two."]
    # The snapshot keeps the whole reply, not its pieces.
    assert view.as_json()["final"]["text"] == "One. Two."


async def test_the_feed_takes_final_deltas_from_replies_only_and_skips_re_read_ones() -> None:
    piece = encode(_reply("t1", "final_delta", "Shown live.", 0))
    old = encode(_reply("t0", "final_delta", "Re-read after a restart.", 0))
    forged = encode(_reply("t2", "final_delta", "From a Coach credential.", 0))
    replies, coach = TopicPartition("replies", 0), TopicPartition("coach-replies", 0)

    class OneBatch:
        def __init__(self) -> None:
            self.fetches = 0

        def assignment(self) -> set[TopicPartition]:
            return set()  # nothing to check for a recreated topic

        async def getmany(self, timeout_ms: int) -> dict[TopicPartition, list[object]]:
            self.fetches += 1
            if self.fetches > 1:
                await asyncio.sleep(3600)
            return {
                replies: [
                    SimpleNamespace(offset=3, key=None, value=old),
                    SimpleNamespace(offset=10, key=None, value=piece),
                ],
                coach: [SimpleNamespace(offset=0, key=None, value=forged)],
            }

    store = TurnStore()
    for turn in ("t0", "t1", "t2"):
        store.open(turn, USER, "s")
    feed = ReplyFeed(
        KafkaSettings(),
        store,
        ReviewQueue(),
        replies_topic="replies",
        review_topic="human-review",
        coach_replies_topic="coach-replies",
        agent_topics=[],
    )
    feed._live_from[replies] = 10  # where the live tail began (set by start)
    consumer = OneBatch()
    task = asyncio.create_task(feed._run(consumer))
    try:
        async with asyncio.timeout(5):
            while consumer.fetches < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
    events = {t: [e for e, _ in store.get(t, USER).events] for t in ("t0", "t1", "t2")}  # type: ignore[union-attr]
    assert events == {"t0": [], "t1": ["final_delta"], "t2": []}
