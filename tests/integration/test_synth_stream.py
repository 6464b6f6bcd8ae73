"""Synth's streamed synthesis over the real broker (issue #19, item 2).

Seven processes on the embedded broker; the LLM is a scripted server
(tests/integration/scripted_llm.py) that writes the text each scenario chose, and
only Synth's prose reaches it (tests/integration/synth_stream_policy.toml). Each
scenario has a user of its own, so no other scenario's words are in its memory.

* a good reply arrives as ordered ``final_delta`` events, then one final whose text
  starts with the streamed sentences (and the OpenAI stream shows it once); the
  first piece is the rendering's opening sentence (tier ``deterministic``), shown
  before the model writes, and the model's sentences continue it;
* a sentence that fails its check (an agent's name) ends the stream there: the
  final keeps what was shown and is completed from the deterministic rendering;
* a crisis turn is never streamed;
* the turn's deadline mid-stream ends the stream and the final, sent exactly
  once, is completed from the rendering.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.fault.conftest import read_topic, running, stack_env
from tests.integration.conftest import RunningStack
from tests.integration.scripted_llm import Script, ScriptedLLM, serve

pytestmark = [pytest.mark.broker, pytest.mark.slow]

HERE = Path(__file__).parent
USERS = ("sam", "tom", "uma", "vic", "wes", "xia", "warm")
KEYS = {u: f"key-{u}-0123456789" for u in USERS}
# The turn's LLM budget runs out this long after the message is accepted; the
# stalled script stalls far longer.
WALL_CLOCK_MS = 12_000

GOOD = (
    "Thanks for telling me how the thesis is going. It sounds like tidying your notes "
    "feels safer than writing, and that is a very human pattern. What if you wrote one "
    "rough paragraph tomorrow before you open the notes at all? Which time of day would "
    "suit that best for you?"
)
# The third sentence names an agent: a merge artefact the check refuses.
BAD = (
    "Thanks for telling me how the thesis is going. It sounds like tidying your notes "
    "feels safer than writing. Shadow noticed this pattern in your last messages. "
    "What if you wrote one rough paragraph tomorrow?"
)
SLOW = GOOD
SLOW_PIECES = 28  # a little past the second sentence: then the model stalls

# About 70 words at 20 tokens a second (a large model's pace): ~3.5 s of writing.
PACED = (
    "Thanks for telling me how the thesis is going. It sounds like tidying your notes "
    "feels safer than writing, and that is a very human pattern. Notes can always be "
    "made a little neater, so the tidying never ends on its own. What if you wrote one "
    "rough paragraph tomorrow before you open the notes at all? It does not need to be "
    "good, only written. Which time of day would suit that best for you?"
)

SCRIPTS = {
    "lighthouse": Script(GOOD),
    "meadow": Script(PACED, piece_s=0.05),
    "pinecone": Script(BAD),
    "harbour": Script(SLOW, stall_after=SLOW_PIECES, stall_s=60.0),
}


def _message(marker: str) -> str:
    return (
        f"I want to finish my thesis ({marker} week), but I keep reorganising my notes "
        "instead of writing."
    )


@pytest_asyncio.fixture(scope="module")
async def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[RunningStack, ScriptedLLM]]:
    llm = ScriptedLLM(SCRIPTS, Script(GOOD))
    async with serve(llm) as base_url:
        env = stack_env(
            f"ss{uuid.uuid4().hex[:8]}.",
            deadline_ms=8_000,
            COACHBUS_API_KEYS=",".join(f"{u}:{k}" for u, k in KEYS.items()),
            COACHBUS_TURN_WALL_CLOCK_MS=str(WALL_CLOCK_MS),
            COACHBUS_LLM_BASE_URL=base_url,
            COACHBUS_LLM_POLICY_FILE=str(HERE / "synth_stream_policy.toml"),
            COACHBUS_LLM_RETRY_WAIT_INITIAL_S="0.01",
            COACHBUS_LLM_RETRY_WAIT_JITTER_S="0",
        )
        async with running(
            kafka_bootstrap, tmp_path_factory.mktemp("synth-stream-logs"), env
        ) as rs:
            # The first turn of a fresh stack waits for the agents' consumers to
            # join their groups, which on a busy machine can take the whole LLM
            # budget: one turn first, so every scenario starts on a warm stack.
            async with httpx.AsyncClient(timeout=30) as client:
                await _turn(client, rs, "warm", "Hello, I would like to plan my week.")
            yield rs, llm


def _headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


async def _turn(
    client: httpx.AsyncClient,
    rs: RunningStack,
    user: str,
    text: str,
    arrivals: dict[str, float] | None = None,
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    sent = time.perf_counter()
    response = await client.post(
        f"{rs.url}/v1/sessions/{user}-s/messages", json={"text": text}, headers=_headers(user)
    )
    assert response.status_code == 202, response.text
    turn_id: str = response.json()["turn_id"]
    events: list[tuple[str, dict[str, Any]]] = []
    async with client.stream(
        "GET", f"{rs.url}/v1/turns/{turn_id}/events", headers=_headers(user), timeout=90
    ) as stream:
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event:
                events.append((event, json.loads(line[6:])))
                if arrivals is not None:
                    arrivals.setdefault(event, time.perf_counter() - sent)
                if event in ("final", "timeout"):
                    break  # a turn that went to a human stays open for its answer
                event = None
    return turn_id, events


def _norm(text: str) -> str:
    return " ".join(text.split())


def _model_part(deltas: list[dict[str, Any]]) -> str:
    """What the model's pieces say, after the rendering's opening sentence."""
    assert deltas and deltas[0]["tier"] == "deterministic", deltas[:1]
    assert all(d["tier"] == "small" for d in deltas[1:]), [d["tier"] for d in deltas]
    return "".join(d["text"] for d in deltas[1:]).strip()


def _split(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    deltas = [d for e, d in events if e == "final_delta"]
    finals = [d for e, d in events if e == "final"]
    assert len(finals) == 1, [e for e, _ in events]
    # Every delta came before the final.
    last_delta = max((i for i, (e, _) in enumerate(events) if e == "final_delta"), default=-1)
    assert last_delta < [e for e, _ in events].index("final")
    return deltas, finals[0]


async def _replies_of(rs: RunningStack, turn_id: str) -> list[dict[str, Any]]:
    """The turn's records on the replies topic itself (not the gateway's view)."""

    def finals(records: list[Any]) -> int:
        return sum(
            1 for r in records if b'"kind":"final"' in r.value and turn_id.encode() in r.value
        )

    records = await read_topic(
        rs.bootstrap, f"{rs.prefix}replies", until=lambda recs: finals(recs) >= 1, settle=2.0
    )
    out = [json.loads(r.value) for r in records if r.value]
    return [r for r in out if r.get("turn_id") == turn_id]


async def test_a_good_synthesis_streams_in_order_then_one_final(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, _llm = stack
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id, events = await _turn(client, rs, "sam", _message("lighthouse"))
    deltas, final = _split(events)
    assert len(deltas) >= 2, deltas
    assert [d["seq"] for d in deltas] == list(range(len(deltas)))
    assert all(d["schema_version"] == 2 and d["turn_id"] == turn_id for d in deltas)
    streamed = "".join(d["text"] for d in deltas)
    assert final["text"].startswith(streamed)
    # The script passed every check: all of it was streamed after the opening, and
    # the two are the reply.
    assert _model_part(deltas) == _norm(GOOD)
    assert final["text"] == streamed == f"{deltas[0]['text']} {_norm(GOOD)}"
    assert final["tier"] == "small"
    # Pieces are whole sentences.
    assert all(d["text"].rstrip()[-1] in ".?!" for d in deltas)
    on_topic = await _replies_of(rs, turn_id)
    assert [r["kind"] for r in on_topic].count("final") == 1


async def test_the_openai_stream_shows_the_synthesis_once(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, _llm = stack
    body = {
        "model": "coachbus",
        "stream": True,
        "user": "tom-oa",
        "messages": [{"role": "user", "content": _message("lighthouse")}],
    }
    contents: list[str] = []
    async with (
        httpx.AsyncClient(timeout=90) as client,
        client.stream(
            "POST", f"{rs.url}/v1/chat/completions", json=body, headers=_headers("tom")
        ) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[6:])["choices"][0]
                contents.append(choice["delta"].get("content") or "")
    text = "".join(contents)
    coach, _, synthesis = text.partition("\n\n---\n\n")
    # The rendering's opening sentence, then the model's reply, each once.
    assert coach and synthesis.endswith(f" {_norm(GOOD)}")
    assert synthesis.count(_norm(GOOD)) == 1 and len(synthesis) > len(_norm(GOOD))
    # The synthesis came in several chunks (its sentences), not as one at the end.
    assert sum(1 for c in contents if c and c in synthesis) >= 2, contents


async def test_a_failing_sentence_ends_the_stream_and_the_rendering_completes_it(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, _llm = stack
    async with httpx.AsyncClient(timeout=30) as client:
        _turn_id, events = await _turn(client, rs, "uma", _message("pinecone"))
    deltas, final = _split(events)
    streamed = "".join(d["text"] for d in deltas)
    # The two good sentences were shown; the third (an agent's name) never was.
    assert _model_part(deltas) == (
        "Thanks for telling me how the thesis is going. It sounds like tidying your "
        "notes feels safer than writing."
    )
    assert "Shadow" not in final["text"]
    assert final["text"].startswith(streamed)
    rest = final["text"][len(streamed) :].strip()
    assert rest, "the final must be completed from the rendering"
    # The completion is the deterministic rendering's, not the model's text.
    assert "rough paragraph tomorrow" not in rest


async def test_a_crisis_turn_is_never_streamed(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, llm = stack
    text = "Everything feels pointless lately. I don't want to live anymore."
    asked = len(llm.requests)
    async with httpx.AsyncClient(timeout=30) as client:
        _turn_id, events = await _turn(client, rs, "vic", text)
    deltas, final = _split(events)
    assert deltas == []
    assert final["tier"] == "deterministic"
    assert not [r for r in llm.requests[asked:] if "pointless lately" in r]


@pytest.mark.heavy
async def test_the_deadline_mid_stream_stops_it_and_the_final_is_sent_once(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    rs, _llm = stack
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id, events = await _turn(client, rs, "wes", _message("harbour"))
    deltas, final = _split(events)
    streamed = "".join(d["text"] for d in deltas)
    assert len(deltas) >= 2, "the sentences before the stall are shown"
    assert GOOD.startswith(_model_part(deltas))
    assert final["text"].startswith(streamed) and final["text"] != streamed
    assert "rough paragraph tomorrow" not in final["text"]  # written after the stall
    on_topic = await _replies_of(rs, turn_id)
    kinds = [r["kind"] for r in on_topic]
    assert kinds.count("final") == 1, kinds
    assert [r["seq"] for r in on_topic if r["kind"] == "final_delta"] == [d["seq"] for d in deltas]


async def test_the_first_synthesis_text_comes_long_before_the_final(
    stack: tuple[RunningStack, ScriptedLLM],
) -> None:
    """Measured, not asserted (timings are not tested): when the first sentence and
    the final reach a client, with a model writing 20 tokens a second; and the
    first-text histogram is on Synth's /metrics, labelled by path and tier only."""
    rs, _llm = stack
    arrivals: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=30) as client:
        _turn_id, events = await _turn(client, rs, "xia", _message("meadow"), arrivals)
        metrics = (await client.get(rs.stack.metrics_url("synth"))).text
    deltas, final = _split(events)
    assert final["text"] == f"{deltas[0]['text']} {_norm(PACED)}"
    assert final["text"] == "".join(d["text"] for d in deltas)
    print(
        f"\nsynthesis of {len(final['text'].split())} words in {len(deltas)} pieces: "
        f"first sentence at {arrivals['final_delta']:.2f} s, final at {arrivals['final']:.2f} s "
        "after the message was sent"
    )
    # The first text of a streamed synthesis is the rendering's opening sentence.
    streamed = re.search(
        r'coachbus_synth_first_text_seconds_count\{path="streamed",tier="deterministic"\} (\S+)',
        metrics,
    )
    assert streamed is not None and float(streamed.group(1)) >= 1, metrics[-2000:]
    labelled = re.findall(r"coachbus_synth_first_text_seconds_count\{([^}]*)\}", metrics)
    assert all(set(re.findall(r"(\w+)=", labels)) == {"path", "tier"} for labels in labelled)
