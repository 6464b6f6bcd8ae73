"""A crash after a completed erase restores nothing of the erased user: the embedded
stack rewrote its snapshot (0600) when the erase completed."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import httpx
import pytest

from coachbus.bus.state import read_latest
from coachbus.embedded.stack import Stack, StackConfig
from coachbus.settings import KafkaSettings
from tests.fault.conftest import new_prefix, stack_env
from tests.integration.conftest import KEYS

pytestmark = [pytest.mark.broker, pytest.mark.slow]
STATE_TOPICS = ("blackboard", "profiles", "safety", "memory")


def _users_in(path: Path) -> set[str]:
    return {json.loads(line)["key"] for line in path.read_text().splitlines()[1:] if line}


async def _stored_users(stack: Stack, prefix: str) -> set[str]:
    kafka = KafkaSettings(bootstrap_servers=stack.env["KAFKA_BOOTSTRAP_SERVERS"])
    users: set[str] = set()
    for topic in STATE_TOPICS:
        latest = await read_latest(kafka, f"{prefix}{topic}")
        users |= {user for user, (_p, value) in latest.items() if value is not None}
    return users


async def _answered(client: httpx.AsyncClient, url: str, user: str, text: str) -> None:
    auth = {"Authorization": f"Bearer {KEYS[user]}"}
    sent = await client.post(f"{url}/v1/sessions/s1/messages", json={"text": text}, headers=auth)
    turn = sent.json()["turn_id"]
    async with asyncio.timeout(30):
        while (await client.get(f"{url}/v1/turns/{turn}", headers=auth)).json()["final"] is None:
            await asyncio.sleep(0.1)


@pytest.mark.heavy
async def test_kill_9_after_a_completed_erase_restores_nothing_of_the_user(
    tmp_path: Path,
) -> None:
    prefix = new_prefix("snap")
    snapshot = tmp_path / "state" / "state.jsonl"
    env = stack_env(prefix, deadline_ms=6000)

    def config() -> StackConfig:
        # bootstrap None: the embedded, memory-only broker, as `make run` has it.
        return StackConfig.ephemeral(bootstrap=None, log_dir=tmp_path, env=env, snapshot=snapshot)

    stack = Stack(config())
    await stack.start()
    try:
        url = stack.gateway_url
        async with httpx.AsyncClient(timeout=30) as client:
            for user in ("alice", "bob"):
                await _answered(client, url, user, "I want to finish my thesis this spring.")
            async with asyncio.timeout(20):  # Synth writes memory just after the final
                while not {"alice", "bob"} <= await _stored_users(stack, prefix):
                    await asyncio.sleep(0.2)
            await stack.snapshot()  # an earlier snapshot that still holds her
            assert "alice" in _users_in(snapshot)
            auth = {"Authorization": f"Bearer {KEYS['alice']}"}
            assert (await client.delete(f"{url}/v1/me", headers=auth)).status_code == 202
            async with asyncio.timeout(30):
                while not (await client.get(f"{url}/v1/me/erase", headers=auth)).json()["complete"]:
                    await asyncio.sleep(0.1)
            async with asyncio.timeout(30):  # rewritten as the erase completed
                while "alice" in _users_in(snapshot):
                    await asyncio.sleep(0.1)
        assert "bob" in _users_in(snapshot)
        assert stat.S_IMODE(snapshot.stat().st_mode) == 0o600
        assert not snapshot.with_suffix(".jsonl.tmp").exists()
        # kill -9: the broker and every service die at once; no clean stop, no
        # snapshot on the way out.
        assert stack.broker is not None and stack.supervisor is not None
        stack.broker._proc.kill()  # type: ignore[union-attr]
        for name in stack.supervisor.names:
            stack.supervisor.kill(name)
    finally:
        await stack.stop()

    restarted = Stack(config())
    await restarted.start()
    try:
        users = await _stored_users(restarted, prefix)
        assert "bob" in users and "alice" not in users
        async with httpx.AsyncClient(timeout=30) as client:
            auth = {"Authorization": f"Bearer {KEYS['alice']}"}
            beliefs = await client.get(f"{restarted.gateway_url}/v1/me/beliefs", headers=auth)
            assert beliefs.json()["shadow"] is None
    finally:
        await restarted.stop()
