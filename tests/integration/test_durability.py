"""Durable state: kill -9 any service mid-turn and every turn is still answered exactly
once; restarts rebuild state from the topics; the embedded broker's state survives
through the snapshot."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer

from coachbus.embedded.stack import Stack, StackConfig
from coachbus.roster import SERVICES as ALL_SERVICES
from tests.integration.conftest import KEYS, RunningStack, events, send

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SERVICES = list(ALL_SERVICES)


def _env(prefix: str, deadline_ms: int = 15000) -> dict[str, str]:
    return {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": "3",
        "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in KEYS.items()),
        "COACHBUS_TURN_DEADLINE_MS": str(deadline_ms),
    }


@pytest_asyncio.fixture(scope="module")
async def chaos_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningStack]:
    prefix = f"ch{uuid.uuid4().hex[:8]}."
    stack = Stack(
        StackConfig.ephemeral(
            bootstrap=kafka_bootstrap,
            log_dir=tmp_path_factory.mktemp("chaos-logs"),
            env={
                **_env(prefix),
                # A killed consumer's partitions move once the broker gives up on it
                # (the session timeout): 2 s instead of the 6 s default lets each kill
                # below recover sooner; the heartbeat stays well inside it.
                "KAFKA_SESSION_TIMEOUT_MS": "2000",
                "KAFKA_HEARTBEAT_INTERVAL_MS": "300",
            },
        )
    )
    await stack.start()
    try:
        yield RunningStack(stack, stack.gateway_url, prefix, kafka_bootstrap)
    finally:
        await stack.stop()


async def finals_by_turn(
    bootstrap: str, topic: str, turns: set[str], timeout: float
) -> Counter[str]:
    """Count final replies per turn on the topic itself (not through the gateway)."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5
    )
    await consumer.start()
    counts: Counter[str] = Counter()
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        # Keep reading a little after all arrived, so a doubled final would be seen.
        settle_until: float | None = None
        while loop.time() < end:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    reply = json.loads(record.value)
                    if reply["kind"] == "final" and reply["turn_id"] in turns:
                        counts[reply["turn_id"]] += 1
            if settle_until is None and set(counts) == turns:
                settle_until = loop.time() + 3.0
            if settle_until is not None and loop.time() >= settle_until:
                break
    finally:
        await consumer.stop()
    return counts


# The three slowest victims (10 to 15 s each on 2 cores) run in make test-heavy.
_HEAVY_VICTIMS = {"shadow", "coach", "synth"}


@pytest.mark.parametrize(
    "victim",
    [pytest.param(v, marks=pytest.mark.heavy) if v in _HEAVY_VICTIMS else v for v in SERVICES],
)
async def test_kill_9_mid_turn_every_turn_answered_once(
    chaos_stack: RunningStack, victim: str
) -> None:
    rs = chaos_stack
    supervisor = rs.stack.supervisor
    assert supervisor is not None
    restarts = supervisor.restarts(victim)
    users = ["alice", "bob", "carol"]
    async with httpx.AsyncClient(timeout=30) as client:
        turn_ids = await asyncio.gather(
            *(
                send(
                    client,
                    rs,
                    users[i % 3],
                    f"Turn {i}: I want to write my report today.",
                    session=f"chaos-{victim}",
                )
                for i in range(20)
            )
        )
    supervisor.kill(victim)  # SIGKILL: no graceful anything
    counts = await finals_by_turn(rs.bootstrap, f"{rs.prefix}replies", set(turn_ids), timeout=90)
    assert supervisor.restarts(victim) == restarts + 1
    missing = set(turn_ids) - set(counts)
    doubled = {t: n for t, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} turns never answered after killing {victim}"
    assert not doubled, f"turns answered twice after killing {victim}: {doubled}"
    await supervisor.wait_healthy(victim)


async def test_restart_rebuilds_state_from_topics(chaos_stack: RunningStack) -> None:
    rs = chaos_stack
    supervisor = rs.stack.supervisor
    assert supervisor is not None
    async with httpx.AsyncClient(timeout=30) as client:
        session = f"restart-{uuid.uuid4().hex[:6]}"
        for text in (
            "I want to go to the gym three times a week.",
            "I skipped the gym again, too tired.",
        ):
            turn = await send(client, rs, "carol", text, session=session)
            await events(client, rs, "carol", turn)
        for service in ("shadow", "persona", "stability"):
            await supervisor.stop_service(service)
            await supervisor.start_service(service)
        await supervisor.wait_healthy()
        turn = await send(client, rs, "carol", "Today I went, finally!", session=session)
        stream = await events(client, rs, "carol", turn)
    agents = {d["agent"]: d for n, d in stream if n == "agent"}
    # Versions continue where they were: the state came back from the topics.
    assert agents["shadow"]["payload"]["blackboard_version"] >= 3
    goals = agents["shadow"]["payload"]["stated_goals"]
    assert any("gym" in g["text"].lower() for g in goals)
    assert agents["persona"]["payload"]["sessions_seen"] >= 1


@pytest.mark.heavy
async def test_embedded_state_survives_restart_through_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "state.jsonl"
    prefix = f"sn{uuid.uuid4().hex[:6]}."

    async def run_once(text: str) -> dict[str, object]:
        # The blackboard's writer and the way in are all this needs: the snapshot
        # holds every state topic whoever wrote it, and the turn is read up to
        # Shadow's result (the final would wait for the absent agents' deadline).
        stack = Stack(
            StackConfig.ephemeral(
                log_dir=tmp_path / "logs",
                env=_env(prefix),
                snapshot=snapshot,
                services=("shadow", "gateway"),
            )
        )
        await stack.start()
        try:
            rs = RunningStack(stack, stack.gateway_url, prefix, "")
            async with httpx.AsyncClient(timeout=30) as client:
                turn = await send(client, rs, "alice", text, session="snap")
                stream = await events(
                    client,
                    rs,
                    "alice",
                    turn,
                    until=lambda n, d: n == "agent" and d["agent"] == "shadow",
                )
        finally:
            await stack.stop()  # writes the snapshot, then stops the embedded broker
        shadow: dict[str, object] = stream[-1][1]
        assert stream[-1][0] == "agent" and shadow["agent"] == "shadow", "no result of Shadow"
        return shadow

    first = await run_once("I want to learn Spanish this year.")
    assert snapshot.exists()
    assert "alice" in snapshot.read_text()
    second = await run_once("I did ten minutes of Spanish today.")
    first_payload = first["payload"]
    second_payload = second["payload"]
    assert isinstance(first_payload, dict) and isinstance(second_payload, dict)
    assert second_payload["blackboard_version"] == first_payload["blackboard_version"] + 1
