"""The whole pipeline as separate processes on the real broker, for integration tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from coachbus.embedded.stack import Stack, StackConfig

KEYS = {
    "alice": "key-alice-0123456789",
    "bob": "key-bob-0123456789",
    "carol": "key-carol-0123456789",
}
REVIEWERS = {"carol"}


@dataclass
class RunningStack:
    stack: Stack
    url: str
    prefix: str
    bootstrap: str

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEYS[user]}"}


@pytest_asyncio.fixture(scope="module")
async def running_stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RunningStack]:
    import uuid

    prefix = f"it{uuid.uuid4().hex[:8]}."
    log_dir = tmp_path_factory.mktemp("stack-logs")
    config = StackConfig.ephemeral(
        bootstrap=kafka_bootstrap,
        log_dir=log_dir,
        env={
            "COACHBUS_TOPIC_PREFIX": prefix,
            "COACHBUS_PARTITIONS": "3",
            "COACHBUS_API_KEYS": ",".join(
                f"{u}:{k}:reviewer" if u in REVIEWERS else f"{u}:{k}" for u, k in KEYS.items()
            ),
            "COACHBUS_TURN_DEADLINE_MS": "6000",
            "COACHBUS_LOG_LEVEL": "INFO",
        },
    )
    stack = Stack(config)
    await stack.start()
    try:
        yield RunningStack(stack, stack.gateway_url, prefix, kafka_bootstrap)
    finally:
        await stack.stop()
        _dump_logs_on_failure(log_dir)


def _dump_logs_on_failure(log_dir: Path) -> None:
    # Keep the service logs visible in CI output when something went wrong.
    for path in sorted(log_dir.glob("*.log")):
        text = path.read_text(errors="replace")
        if "Traceback" in text or "ERROR" in text:
            print(f"\n===== {path.name} (tail) =====\n{text[-4000:]}")


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
    client: httpx.AsyncClient, rs: RunningStack, user: str, turn_id: str, timeout: float = 60
) -> list[tuple[str, dict[str, Any]]]:
    """Read the turn's server-sent events until the stream closes."""
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
                event = None
    return out
