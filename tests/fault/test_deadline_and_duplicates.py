"""An agent slower than the turn deadline, and duplicate deliveries.

Slow agent: with the agent stopped, Synth answers at the deadline, degraded and
naming it; when the agent comes back and works off its backlog, its late results
are dropped: no second final. Duplicates: the same user message and agent result
bytes published again (before and after the final) change nothing: one coach
reply and one final per turn, on the topic and through the gateway.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from coachbus.contracts import UserMessage
from tests.fault.conftest import by_event, post_turn, produce, read_topic, replies_for
from tests.integration.conftest import RunningStack, events, until_whole

pytestmark = [pytest.mark.broker, pytest.mark.slow]


# The slow agent's turns are published straight onto user-messages with their own
# deadline, so they need no private stack with a short one: long enough that healthy
# agents make it on a loaded machine, short enough to wait for. (The gateway's own
# deadline, SHARED_DEADLINE_MS on the shared stack, is proven in
# tests/integration/test_pipeline.py.)
SLOW_DEADLINE_MS = 4_000


@pytest.mark.heavy
async def test_agent_slower_than_deadline_degrades_and_late_result_is_dropped(
    running_stack: RunningStack,
) -> None:
    rs = running_stack
    supervisor = rs.stack.supervisor
    assert supervisor is not None
    messages = [
        UserMessage.create(
            user_id="alice",
            session_id="dl",
            text=f"Slow turn {i}: I want to read more.",
            deadline_ms=SLOW_DEADLINE_MS,
            max_tokens=24_000,
            wall_clock_ms=60_000,
        )
        for i in range(4)
    ]
    turns = [m.turn_id for m in messages]
    await supervisor.stop_service("plasticity")
    try:
        raw = [(b"alice", m.model_dump_json().encode()) for m in messages]
        await produce(rs.bootstrap, f"{rs.prefix}user-messages", raw)
        replies = await replies_for(rs, set(turns), timeout=60)
        async with httpx.AsyncClient(timeout=30) as client:
            stream = await events(client, rs, "alice", turns[0], timeout=60)
    finally:
        await supervisor.start_service("plasticity")
    # The gateway shows the turn's one final: degraded, naming the missing agent.
    finals = by_event(stream)["final"]
    assert len(finals) == 1
    assert finals[0]["degraded"] is True
    assert "plasticity" in finals[0]["missing_agents"]
    assert not replies.missing(turns)
    for turn in turns:
        assert "plasticity" in replies.last_final[turn]["missing_agents"]

    # The agent is back and answers its backlog: its late results reach the topic...
    await supervisor.wait_healthy("plasticity")
    await until_whole(rs)
    late = await read_topic(
        rs.bootstrap,
        f"{rs.prefix}agent.plasticity",
        until=lambda recs: set(turns) <= {json.loads(r.value)["turn_id"] for r in recs},
        timeout=60,
        settle=0.5,
    )
    assert set(turns) <= {json.loads(r.value)["turn_id"] for r in late}
    # ...and Synth drops them: still exactly one final per turn.
    after = await replies_for(rs, set(turns), timeout=30, settle=4)
    assert not after.doubled(), f"late results produced second finals: {after.doubled()}"


async def test_duplicate_user_messages_before_the_final(running_stack: RunningStack) -> None:
    """Each message published three times at once (a producer retry storm)."""
    rs = running_stack
    messages = [
        UserMessage.create(
            user_id="bob",
            session_id="dup-pre",
            text=f"Duplicate {i}: I want to call my mother more often.",
            deadline_ms=15_000,
            max_tokens=24_000,
            wall_clock_ms=60_000,
        )
        for i in range(5)
    ]
    raw = [(b"bob", m.model_dump_json().encode()) for m in messages]
    await produce(rs.bootstrap, f"{rs.prefix}user-messages", [r for r in raw for _ in range(3)])
    turns = {m.turn_id for m in messages}
    replies = await replies_for(rs, turns, timeout=60, settle=4)
    assert not replies.missing(turns)
    assert not replies.doubled(), replies.doubled()
    assert all(replies.coach[t] == 1 for t in turns), dict(replies.coach)


@pytest.mark.heavy
async def test_duplicate_messages_and_results_after_the_final(running_stack: RunningStack) -> None:
    """Redeliver a finished turn's user message and every agent result: no second final,
    no second coach reply, and the gateway shows one of each."""
    rs = running_stack
    async with httpx.AsyncClient(timeout=30) as client:
        turn = await post_turn(client, rs, "alice", "I keep missing my Spanish lessons.", "dup")
        first = by_event(await events(client, rs, "alice", turn))
        assert len(first["final"]) == 1

        topics = ["user-messages", *(f"agent.{a}" for a in ("shadow", "persona", "plasticity"))]
        topics += ["agent.stability", "agent.coach"]
        for topic in topics:
            records = await read_topic(
                rs.bootstrap,
                f"{rs.prefix}{topic}",
                until=lambda recs: any(turn.encode() in (r.value or b"") for r in recs),
                timeout=20,
                settle=0.2,
            )
            mine = [(r.key, r.value) for r in records if turn.encode() in (r.value or b"")]
            assert mine, topic
            await produce(rs.bootstrap, f"{rs.prefix}{topic}", mine * 2)

        # Let the redeliveries go through every consumer, then look again.
        await asyncio.sleep(3)
        replies = await replies_for(rs, {turn}, timeout=30, settle=3)
        view = (await client.get(f"{rs.url}/v1/turns/{turn}", headers=rs.headers("alice"))).json()
        again = by_event(await events(client, rs, "alice", turn))
    assert replies.finals[turn] == 1
    assert replies.coach[turn] == 1
    assert view["final"] is not None and view["coach"] is not None
    assert len(again["final"]) == 1 and len(again["coach"]) == 1
