"""Erase means erased: the issue's race, collapsed and confirmed erasure, the rate
limit, a restarted gateway, and Synth's memory of a turn finalised after an erase."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from coachbus.embedded.stack import Stack, StackConfig
from tests.integration.conftest import RunningStack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

USERS = [f"er{n}" for n in range(8)]
REVIEWER = "rev"
KEYS = {u: f"key-{u}-0123456789" for u in [*USERS, REVIEWER]}
RATE = 30
DEADLINE_MS = 6000
GOAL = "I want to finish my thesis, but I keep reorganising my notes"
CRISIS = "I want to kill myself, there is no way out"


def headers(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


@pytest_asyncio.fixture(scope="module")
async def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningStack]:
    prefix = f"er{uuid.uuid4().hex[:8]}."
    config = StackConfig.ephemeral(
        bootstrap=kafka_bootstrap,
        log_dir=tmp_path_factory.mktemp("erase-logs"),
        env={
            "COACHBUS_TOPIC_PREFIX": prefix,
            "COACHBUS_PARTITIONS": "3",
            "COACHBUS_API_KEYS": ",".join(
                f"{u}:{k}:reviewer" if u == REVIEWER else f"{u}:{k}" for u, k in KEYS.items()
            ),
            "COACHBUS_TURN_DEADLINE_MS": str(DEADLINE_MS),
            "COACHBUS_RATE_LIMIT_PER_MINUTE": str(RATE),
        },
    )
    running = Stack(config)
    await running.start()
    try:
        yield RunningStack(running, running.gateway_url, prefix, kafka_bootstrap)
    finally:
        await running.stop()


async def _send(client: httpx.AsyncClient, rs: RunningStack, user: str, text: str) -> str:
    response = await client.post(
        f"{rs.url}/v1/sessions/s1/messages", json={"text": text}, headers=headers(user)
    )
    assert response.status_code == 202, response.text
    turn_id: str = response.json()["turn_id"]
    return turn_id


async def _nothing_readable(
    client: httpx.AsyncClient, rs: RunningStack, user: str, turn_id: str
) -> dict[str, Any]:
    beliefs = (await client.get(f"{rs.url}/v1/me/beliefs", headers=headers(user))).json()
    turn = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=headers(user))
    return {"shadow": beliefs["shadow"], "persona": beliefs["persona"], "turn": turn.status_code}


async def test_issue_repro_message_then_erase_20ms_later(stack: RunningStack) -> None:
    """The issue's repro: a message, DELETE /v1/me 20 ms later; 4 s after the 202 the
    beliefs and the turn are gone, and they stay gone once the turn has settled."""
    rs = stack
    user = USERS[0]
    async with httpx.AsyncClient(timeout=30) as client:
        turn_id = await _send(client, rs, user, GOAL)
        await asyncio.sleep(0.02)
        erased = await client.delete(f"{rs.url}/v1/me", headers=headers(user))
        assert erased.status_code == 202
        await asyncio.sleep(4)
        expected = {"shadow": None, "persona": None, "turn": 404}
        assert await _nothing_readable(client, rs, user, turn_id) == expected
        # Past the turn's deadline (6 s) a late final or result would have landed.
        await asyncio.sleep(4)
        assert await _nothing_readable(client, rs, user, turn_id) == expected


async def _wait_final(client: httpx.AsyncClient, rs: RunningStack, user: str, turn: str) -> None:
    async with asyncio.timeout(30):
        while True:
            view = await client.get(f"{rs.url}/v1/turns/{turn}", headers=headers(user))
            if view.status_code == 200 and view.json()["final"] is not None:
                return
            await asyncio.sleep(0.1)


async def _erase_records(rs: RunningStack, user: str) -> list[dict[str, Any]]:
    """The EraseRequests of ``user`` on user-messages, read from the topic itself."""
    from tests.fault.conftest import read_topic

    records = await read_topic(rs.bootstrap, f"{rs.prefix}user-messages", timeout=3, settle=0)
    out = []
    for record in records:
        body = json.loads(record.value)
        if body.get("user_id") == user and body.get("kind") == "erase":
            out.append(body)
    return out


async def _erase_complete(client: httpx.AsyncClient, rs: RunningStack, user: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            status = await client.get(f"{rs.url}/v1/me/erase", headers=headers(user))
            assert status.status_code == 200, status.text
            body: dict[str, Any] = status.json()
            if body["complete"]:
                return body
            await asyncio.sleep(0.1)


@pytest.mark.heavy
async def test_erase_is_collapsed_while_pending_and_completes(stack: RunningStack) -> None:
    rs = stack
    user = USERS[1]
    async with httpx.AsyncClient(timeout=30) as client:
        none_yet = await client.get(f"{rs.url}/v1/me/erase", headers=headers(user))
        assert none_yet.status_code == 404
        turn_id = await _send(client, rs, user, GOAL)
        await _wait_final(client, rs, user, turn_id)
        # Five at once: every call while an erase is pending gets its receipt and
        # publishes nothing. (An idle stack can complete an erase within tens of
        # milliseconds, so a late call may rightly start a second one: what must
        # hold is one published request per receipt that was not collapsed. The
        # exact collapse is unit-tested with a held erase.)
        answers = await asyncio.gather(
            *(client.delete(f"{rs.url}/v1/me", headers=headers(user)) for _ in range(5))
        )
        assert {a.status_code for a in answers} == {202}
        receipts = [a.json() for a in answers]
        started = [r["request_id"] for r in receipts if not r["collapsed"]]
        assert len(started) == len(set(started)) == len({r["request_id"] for r in receipts})
        first = next(r for r in receipts if not r["collapsed"])
        assert set(first["owners"]) == {"shadow", "persona", "stability", "synth"}
        assert first["erased_at"] and first["offset"] >= 0
        done = await _erase_complete(client, rs, user)
        assert done["request_id"] == max(started)  # ids are time-ordered (UUIDv7)
        assert done["status"] == "erased" and done["pending"] == []
        assert sorted(e["turn_id"] for e in await _erase_records(rs, user)) == sorted(started)
        # Complete: a new erase is a new request.
        again = await client.delete(f"{rs.url}/v1/me", headers=headers(user))
        assert again.json()["request_id"] != first["request_id"]
        assert again.json()["collapsed"] is False


async def test_erase_is_rate_limited_like_messages(stack: RunningStack) -> None:
    rs = stack
    user = USERS[2]
    async with httpx.AsyncClient(timeout=30) as client:
        codes = [
            (await client.delete(f"{rs.url}/v1/me", headers=headers(user))).status_code
            for _ in range(RATE + 1)
        ]
        assert codes[:RATE] == [202] * RATE
        assert codes[RATE] == 429
        limited = await client.delete(f"{rs.url}/v1/me", headers=headers(user))
        assert limited.status_code == 429
        assert int(limited.headers["Retry-After"]) >= 1
        # Other users are not affected.
        other = await client.delete(f"{rs.url}/v1/me", headers=headers(USERS[3]))
        assert other.status_code == 202


async def _review_items(client: httpx.AsyncClient, rs: RunningStack) -> list[dict[str, Any]]:
    listing = await client.get(f"{rs.url}/v1/review", headers=headers(REVIEWER))
    assert listing.status_code == 200
    items: list[dict[str, Any]] = listing.json()["items"]
    return items


async def test_restarted_gateway_does_not_show_an_erased_users_review(stack: RunningStack) -> None:
    rs = stack
    erased, kept = USERS[4], USERS[5]
    async with httpx.AsyncClient(timeout=30) as client:
        gone_turn = await _send(client, rs, erased, CRISIS)
        kept_turn = await _send(client, rs, kept, CRISIS)
        async with asyncio.timeout(30):
            while not {gone_turn, kept_turn} <= {
                i["turn_id"] for i in await _review_items(client, rs)
            }:
                await asyncio.sleep(0.2)
        assert (await client.delete(f"{rs.url}/v1/me", headers=headers(erased))).status_code == 202
        assert gone_turn not in {i["turn_id"] for i in await _review_items(client, rs)}
        await _erase_complete(client, rs, erased)
        supervisor = rs.stack.supervisor
        assert supervisor is not None
        await supervisor.stop_service("gateway")
        await supervisor.start_service("gateway")
        await supervisor.wait_healthy("gateway", timeout_s=60)
        # The restarted gateway re-reads the review tail: the other user's item is
        # back, the erased user's is not, and their erase status is still known.
        async with asyncio.timeout(30):
            while kept_turn not in {i["turn_id"] for i in await _review_items(client, rs)}:
                await asyncio.sleep(0.2)
        items = await _review_items(client, rs)
        assert all(i["user_id"] != erased for i in items)
        assert CRISIS not in json.dumps([i for i in items if i["turn_id"] == gone_turn])
        status = await client.get(f"{rs.url}/v1/me/erase", headers=headers(erased))
        assert status.json()["complete"] is True


@pytest.mark.heavy
async def test_synth_writes_no_memory_for_a_turn_of_before_the_erase(
    stack: RunningStack,
) -> None:
    """Synth down while a turn is answered and the user erases: when it comes back it
    replays the turn's records and the erase; no final and no memory of that turn."""
    from coachbus.bus.state import read_latest
    from coachbus.settings import KafkaSettings
    from tests.fault.conftest import read_topic

    rs = stack
    user = USERS[6]
    supervisor = rs.stack.supervisor
    assert supervisor is not None
    kafka = KafkaSettings(bootstrap_servers=rs.bootstrap)
    async with httpx.AsyncClient(timeout=30) as client:
        await supervisor.stop_service("synth")
        try:
            turn_id = await _send(client, rs, user, GOAL)
            sent = asyncio.get_running_loop().time()
            async with asyncio.timeout(30):  # the agents answered it
                while True:
                    view = await client.get(f"{rs.url}/v1/turns/{turn_id}", headers=headers(user))
                    if len(view.json()["agents"]) == 5:
                        break
                    await asyncio.sleep(0.1)
            erased = await client.delete(f"{rs.url}/v1/me", headers=headers(user))
            assert erased.status_code == 202
        finally:
            await supervisor.start_service("synth")
            await supervisor.wait_healthy("synth", timeout_s=60)
        await _erase_complete(client, rs, user)  # synth confirmed: it read the erase
        # Past the turn's deadline (2 s of room for a late final to land) and 3 s
        # after Synth read the erase: a final Synth would have sent by now. Synth's
        # restart usually spent most of the deadline already.
        past_deadline = sent + DEADLINE_MS / 1000 + 2 - asyncio.get_running_loop().time()
        await asyncio.sleep(max(3.0, past_deadline))
        memory = (await read_latest(kafka, f"{rs.prefix}memory")).get(user)
        assert memory is None or memory[1] is None
        replies = await read_topic(rs.bootstrap, f"{rs.prefix}replies", timeout=3, settle=0)
        finals = [
            r for r in replies if json.loads(r.value).get("turn_id") == turn_id
            and json.loads(r.value).get("kind") == "final"
        ]  # fmt: skip
        assert finals == []
