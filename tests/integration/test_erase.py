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
            "COACHBUS_TURN_DEADLINE_MS": "6000",
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
