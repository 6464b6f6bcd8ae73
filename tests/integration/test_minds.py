"""The minds end to end: the scripted conversation through the real pipeline (seven
processes, embedded broker), once on the deterministic tier (the session's shared
stack: its users are this module's alone) and once thinking through the LLM
simulator (a private stack: it reconfigures every agent), checking the issue's
"Done when"."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from coachbus.embedded.stack import Stack, StackConfig
from coachbus.llm.sim import SimConfig
from coachbus.roster import AGENT_SERVICES
from coachbus.safety.steps import CATALOGUE
from tests.fixtures.conversation import CONVERSATION, ScriptedTurn, turns_for
from tests.integration.conftest import KEYS as SHARED_KEYS
from tests.integration.conftest import RunningStack, until_whole
from tests.shared.llm.simserver import serve_in_background

pytestmark = [pytest.mark.broker, pytest.mark.slow]

USERS = ("alex", "jonas", "frau_berger")
# The shared stack knows these users' keys (tests/integration/conftest.py).
KEYS = {u: SHARED_KEYS[u] for u in USERS}
# What a merged reply must never show: agent names, field names, JSON, brackets.
ARTEFACTS = re.compile(
    r"\b(?:shadow|persona|plasticity|synth|coachbus)\b|\b[a-z]+_[a-z0-9_]+\b|"
    r"[{}\[\]<>]|\"\w+\"\s*:|\bnull\b|\bpayload\b|\bblackboard\b",
    re.I,
)


class Pipeline:
    def __init__(self, stack: Stack, prefix: str, bootstrap: str) -> None:
        self.stack = stack
        self.url = stack.gateway_url
        self.prefix = prefix
        self.bootstrap = bootstrap

    @classmethod
    def shared(cls, rs: RunningStack) -> Pipeline:
        return cls(rs.stack, rs.prefix, rs.bootstrap)


@asynccontextmanager
async def pipeline(bootstrap: str, log_dir: Path, llm_url: str | None) -> AsyncIterator[Pipeline]:
    prefix = f"mi{uuid.uuid4().hex[:8]}."
    env = {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": "3",
        "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in KEYS.items()),
        "COACHBUS_TURN_DEADLINE_MS": "5000",
        "COACHBUS_LOG_LEVEL": "INFO",
    }
    if llm_url is not None:
        env |= {
            "COACHBUS_LLM_BASE_URL": llm_url,
            "COACHBUS_LLM_RETRY_WAIT_INITIAL_S": "0.01",
            "COACHBUS_LLM_RETRY_WAIT_JITTER_S": "0",
        }
    stack = Stack(StackConfig.ephemeral(bootstrap=bootstrap, log_dir=log_dir, env=env))
    await stack.start()
    try:
        yield Pipeline(stack, prefix, bootstrap)
    finally:
        await stack.stop()
        _dump_logs(log_dir)


def _dump_logs(log_dir: Path) -> None:
    # Keep a failing service's log visible in the test output.
    for path in sorted(log_dir.glob("*.log")):
        text = path.read_text(errors="replace")
        if "Traceback" in text:
            print(f"\n===== {path.name} (tail) =====\n{text[-3000:]}")


async def play(
    client: httpx.AsyncClient, p: Pipeline, turn: ScriptedTurn, session: str
) -> dict[str, Any]:
    """Send one turn, read its events; returns them with the coach reply's latency."""
    headers = {"Authorization": f"Bearer {KEYS[turn.user_id]}"}
    sent = time.perf_counter()
    response = await client.post(
        f"{p.url}/v1/sessions/{session}/messages", json={"text": turn.text}, headers=headers
    )
    assert response.status_code == 202, response.text
    turn_id = response.json()["turn_id"]
    out: dict[str, Any] = {"turn_id": turn_id, "agents": {}, "deltas": [], "turn": turn}
    async with client.stream(
        "GET", f"{p.url}/v1/turns/{turn_id}/events", headers=headers, timeout=60
    ) as stream:
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event:
                data = json.loads(line[6:])
                if event == "agent":
                    out["agents"][data["agent"]] = data
                elif event == "coach":
                    out["coach"] = data
                    out["coach_s"] = time.perf_counter() - sent
                elif event == "coach_delta":
                    out["deltas"].append(data)
                elif event == "final":
                    out["final"] = data
                    break  # a turn that went to a human stays open for its answer
                event = None
    if "coach" not in out:
        # The events stream ends with the final; a coach reply written by a slow model
        # can come after a deadline-degraded final, and the turn's view keeps it.
        view = await client.get(f"{p.url}/v1/turns/{turn_id}", headers=headers)
        out["coach"] = view.json().get("coach")
        out["coach_s"] = time.perf_counter() - sent
    assert out.get("final") and out.get("coach"), f"turn {turn.turn_id} incomplete"
    return out


async def converse(
    p: Pipeline, turns: list[ScriptedTurn], run: str
) -> dict[str, list[dict[str, Any]]]:
    """The turns one after another. Users in parallel would be more realistic, but
    seven processes and the broker share two cores in CI: the one-second bound on
    the crisis reply is about the pipeline's path, not about CPU contention."""
    played: dict[str, list[dict[str, Any]]] = {u: [] for u in USERS}
    async with httpx.AsyncClient(timeout=30) as client:
        for t in turns:
            played[t.user_id].append(await play(client, p, t, f"{run}-{t.session_id}"))
    return played


async def topic_values(p: Pipeline, topic: str, timeout: float = 5) -> list[dict[str, Any]]:
    """Everything on the topic so far, read up to its end offsets (on the shared
    stack the topic holds every module's records: one fetch may not bring them all)."""
    name = p.prefix + topic
    consumer = AIOKafkaConsumer(
        bootstrap_servers=p.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        await consumer.topics()  # metadata, so the topic's partitions are known
        tps = [TopicPartition(name, n) for n in sorted(consumer.partitions_for_topic(name) or ())]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while loop.time() < give_up:
            positions = [await consumer.position(tp) for tp in ends]
            if all(at >= end for at, end in zip(positions, ends.values(), strict=True)):
                break
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    # The shared stack's topics also hold the hostile-input modules'
                    # garbage records (tests/fault/test_hostile_consumers.py).
                    with contextlib.suppress(ValueError):
                        value = json.loads(r.value) if r.value else None
                        if isinstance(value, dict):
                            out.append(value)
    finally:
        await consumer.stop()
    return out


def check_done_when(played: dict[str, list[dict[str, Any]]], reviews: list[dict[str, Any]]) -> None:
    everything = [t for turns in played.values() for t in turns]
    print("coach reply latencies:", sorted(round(t["coach_s"], 2) for t in everything))
    # Replies carry no merge artefacts (the coach's immediate one neither).
    for t in everything:
        for kind in ("final", "coach"):
            m = ARTEFACTS.search(t[kind]["text"])
            assert m is None, f"{t['turn'].turn_id} {kind}: artefact {m.group(0)!r}"

    # The blackboard holds patterns with evidence.
    alex = played["alex"]
    patterns = alex[-1]["agents"]["shadow"]["payload"]["patterns"]
    assert any(p["evidence"] for p in patterns), patterns

    # Persona's confidence rises with evidence.
    conf = [t["agents"]["persona"]["payload"]["confidence"] for t in alex]
    assert conf[-1] > conf[0], conf

    # Ambition vs. a blocked step: the step never reaches the reply, the conflict is kept.
    conflicted = [t for t in everything if t["turn"].expect_conflict]
    assert conflicted
    for t in conflicted:
        final = t["final"]
        markers = [m for sid in t["turn"].expect_blocked for m in CATALOGUE[sid].markers]
        low = final["text"].lower()
        assert not [m for m in markers if m in low], (t["turn"].turn_id, final["text"])
        assert t["turn"].expect_conflict in {c["rule"] for c in final["conflicts"]}

    # A crisis reaches the human queue; the user has a safe reply within a second.
    crises = [t for t in everything if t["turn"].expect_crisis]
    assert crises
    reviewed = {r["turn_id"] for r in reviews}
    for t in crises:
        assert t["turn_id"] in reviewed, t["turn"].turn_id
        assert t["coach_s"] < 1.0, (t["turn"].turn_id, t["coach_s"])
        assert t["coach"]["tier"] == "deterministic"
        assert t["agents"]["stability"]["payload"]["crisis"]["category"] == t["turn"].expect_crisis


@pytest.mark.heavy
async def test_conversation_on_the_deterministic_tier(running_stack: RunningStack) -> None:
    # The shared stack: deterministic tier, and the restart of Shadow below ends with
    # Shadow healthy again (tests/conftest.py).
    p = Pipeline.shared(running_stack)
    played = await converse(p, list(CONVERSATION), "det")
    reviews = await topic_values(p, "human-review")
    check_done_when(played, reviews)
    for t in (t for turns in played.values() for t in turns):
        tiers = {a["tier"] for a in t["agents"].values()}
        assert tiers == {"deterministic"}, (t["turn"].turn_id, tiers)
        assert t["final"]["tier"] == "deterministic" and not t["deltas"]

    # The blackboard survives a restart of its writer: it comes back from the topic.
    before = played["alex"][-1]["agents"]["shadow"]["payload"]
    supervisor = p.stack.supervisor
    assert supervisor is not None
    await supervisor.stop_service("shadow")
    await supervisor.start_service("shadow")
    await supervisor.wait_healthy("shadow")
    await until_whole(running_stack, user="bob")
    last = turns_for("alex")[-1]
    async with httpx.AsyncClient(timeout=30) as client:
        again = await play(client, p, last, f"det-{last.session_id}")
    # The restarted Shadow may still be joining its group when the turn's deadline
    # passes (Synth then answers degraded), so its result is read from its topic.
    after = again["agents"].get("shadow", {}).get("payload")
    deadline = time.monotonic() + 30
    while after is None and time.monotonic() < deadline:
        mine = [
            r for r in await topic_values(p, "agent.shadow") if r["turn_id"] == again["turn_id"]
        ]
        after = mine[0]["payload"] if mine else None
    assert after is not None, "the restarted Shadow never answered"
    assert after["blackboard_version"] == before["blackboard_version"] + 1
    kept = {p["pattern"] for p in before["patterns"]}
    assert kept <= {p["pattern"] for p in after["patterns"]}


@pytest.mark.heavy
async def test_conversation_through_the_simulator(kafka_bootstrap: str, tmp_path: Path) -> None:
    # Alex's 17 turns carry patterns, ambition vs. risk and a crisis; the German
    # users are left to the deterministic run to keep the module within minutes.
    turns = [t for t in CONVERSATION if t.user_id == "alex"]
    sim = SimConfig(ttft_ms=5, tokens_per_s=0, seed=11)
    async with (
        serve_in_background(sim) as llm_url,
        pipeline(kafka_bootstrap, tmp_path, llm_url) as p,
    ):
        played = await converse(p, turns, "sim")
        reviews = await topic_values(p, "human-review")
        check_done_when(played, reviews)
        everything = [t for turns in played.values() for t in turns]
        tiers = {a["tier"] for t in everything for a in t["agents"].values()}
        assert tiers - {"deterministic"}, tiers
        # Plasticity has no LLM tier: its mapping is a documented table.
        assert {t["agents"]["plasticity"]["tier"] for t in everything} == {"deterministic"}
        streamed = [t for t in everything if t["coach"]["tier"] == "small"]
        assert streamed, "the Coach never used the model"
        for t in streamed:
            seqs = [d["seq"] for d in t["deltas"]]
            assert seqs == sorted(seqs)

        # A redelivered, already answered message costs no second LLM call.
        stats_url = llm_url.removesuffix("/v1") + "/stats"
        async with httpx.AsyncClient(timeout=10) as client:
            before = (await client.get(stats_url)).json()["requests"]
            answered = played["alex"][0]["turn_id"]
            raw = [m for m in await topic_values(p, "user-messages") if m["turn_id"] == answered]
            assert len(raw) == 1
            producer = AIOKafkaProducer(bootstrap_servers=p.bootstrap)
            await producer.start()
            try:
                await producer.send_and_wait(
                    p.prefix + "user-messages",
                    json.dumps(raw[0]).encode(),
                    key=raw[0]["user_id"].encode(),
                )
            finally:
                await producer.stop()
            await _consumed_by_every_agent(p, "user-messages")
            after = (await client.get(stats_url)).json()["requests"]
        assert after == before
        finals = [
            r
            for r in await topic_values(p, "replies")
            if r["turn_id"] == answered and r["kind"] == "final"
        ]
        assert len(finals) == 1


async def _consumed_by_every_agent(p: Pipeline, topic: str, timeout: float = 30) -> None:
    """Wait until every agent's group has committed the topic up to its current end:
    each has handled (or skipped) everything on it, the last record included."""
    name = p.prefix + topic
    probe = AIOKafkaConsumer(bootstrap_servers=p.bootstrap)
    await probe.start()
    try:
        await probe.topics()
        tps = [TopicPartition(name, n) for n in sorted(probe.partitions_for_topic(name) or ())]
        ends = await probe.end_offsets(tps)
    finally:
        await probe.stop()
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    for agent in AGENT_SERVICES:
        # The group's committed offsets, read as any member would (OffsetFetch); this
        # consumer never subscribes, so it never joins the group.
        group = AIOKafkaConsumer(
            bootstrap_servers=p.bootstrap, group_id=p.prefix + agent, enable_auto_commit=False
        )
        await group.start()
        try:
            while True:
                # A partition nobody ever wrote to has no committed offset (and ends at 0).
                committed = {tp: await group.committed(tp) or 0 for tp in tps}
                if all(committed[tp] >= end for tp, end in ends.items()):
                    break
                assert loop.time() < give_up, f"{agent} still behind on {name}"
                await asyncio.sleep(0.2)
        finally:
            await group.stop()
