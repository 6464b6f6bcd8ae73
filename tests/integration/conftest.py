"""Users, keys and HTTP helpers of the tests on a whole stack.

The shared stack itself (``running_stack``) is session-scoped, in tests/conftest.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from coachbus.embedded.stack import Stack

KEYS = {
    "alice": "key-alice-0123456789",
    "bob": "key-bob-0123456789",
    "carol": "key-carol-0123456789",
    # The OpenAPI fuzz's own users: it erases and answers reviews at random.
    "hugo": "key-hugo-0123456789",
    "rita": "key-carol-0123456789x",
    # The scripted conversation's users (tests/integration/test_minds.py).
    "alex": "key-alex-0123456789",
    "jonas": "key-jonas-0123456789",
    "frau_berger": "key-frau_berger-0123456789",
    # Risk across a conversation (tests/integration/test_conversation_risk.py): users
    # of their own, since a conversation's warning signs are per user.
    "dana": "key-dana-0123456789",
    "emil": "key-emil-0123456789",
    "fritz": "key-fritz-0123456789",
    "gus": "key-gus-0123456789",
    "hanna": "key-hanna-0123456789",
    # The review console's person (tests/browser/test_review_console.py).
    "ines": "key-ines-0123456789",
}
REVIEWERS = {"carol", "rita"}


@dataclass
class RunningStack:
    stack: Stack
    url: str
    prefix: str
    bootstrap: str

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEYS[user]}"}


async def send(
    client: httpx.AsyncClient, rs: RunningStack, user: str, text: str, session: str = "s1"
) -> str:
    response = await client.post(
        f"{rs.url}/v1/sessions/{session}/messages", json={"text": text}, headers=rs.headers(user)
    )
    assert response.status_code == 202, response.text
    turn_id: str = response.json()["turn_id"]
    return turn_id


async def events(
    client: httpx.AsyncClient,
    rs: RunningStack,
    user: str,
    turn_id: str,
    timeout: float = 60,
    until: Callable[[str, dict[str, Any]], bool] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Read the turn's server-sent events up to the first event for which
    ``until(name, data)`` holds; by default up to the ``final`` (a turn that went to a
    human keeps its stream open after it for the reviewer's answer)."""
    if until is None:
        until = _the_final
    out: list[tuple[str, dict[str, Any]]] = []
    async with client.stream(
        "GET", f"{rs.url}/v1/turns/{turn_id}/events", headers=rs.headers(user), timeout=timeout
    ) as response:
        assert response.status_code == 200
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event:
                out.append((event, json.loads(line[6:])))
                if until(*out[-1]):
                    break
                event = None
    return out


def _the_final(name: str, _data: dict[str, Any]) -> bool:
    return name in ("final", "timeout")


async def until_whole(rs: RunningStack, user: str = "alice", timeout: float = 90) -> None:
    """Probe turns until one is answered by every agent. A restarted service is
    healthy (its HTTP port answers) seconds before its consumer has rejoined its
    group; a test that restarts an agent of the shared stack ends with this, so the
    next module's turns are not answered degraded for want of it."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    async with httpx.AsyncClient(timeout=30) as client:
        while loop.time() < give_up:
            turn = await send(client, rs, user, "Just checking in.", session="probe")
            finals = [d for name, d in await events(client, rs, user, turn) if name == "final"]
            if finals and not finals[-1]["missing_agents"]:
                return
    raise TimeoutError(f"no turn answered by every agent within {timeout} s")
