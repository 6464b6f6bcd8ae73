"""Helpers of the fault, load and hostile-input suite.

Every check of "nothing lost, nothing doubled" reads the topics themselves (not
the gateway, which de-duplicates for its clients): a doubled final on the replies
topic is a defect even if no client would ever see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from coachbus.embedded.broker import free_port, port_open
from coachbus.embedded.stack import Stack, StackConfig
from tests.integration.conftest import KEYS, RunningStack

HERE = Path(__file__).parent
# Every decision kind with min_confidence 1.0: the deterministic tier only carries
# a decision it is certain of, so nearly every decision reaches the LLM tiers.
LLM_POLICY = HERE / "llm_policy.toml"


def stack_env(prefix: str, deadline_ms: int = 15_000, **extra: str) -> dict[str, str]:
    env = {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": "3",
        "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in KEYS.items()),
        "COACHBUS_TURN_DEADLINE_MS": str(deadline_ms),
        # The fault tests fire bursts; the per-key limit is tested elsewhere.
        "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
        "COACHBUS_LOG_LEVEL": "INFO",
    }
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def running(
    bootstrap: str | None, log_dir: Path, env: dict[str, str], **config: Any
) -> AsyncIterator[RunningStack]:
    """A private stack for a module that kills, restarts or reconfigures something
    (everything else shares ``running_stack``); its logs are printed if it logged a
    traceback."""
    stack = Stack(StackConfig.ephemeral(bootstrap=bootstrap, log_dir=log_dir, env=env, **config))
    await stack.start()
    try:
        url = stack.gateway_url
        yield RunningStack(
            stack, url, env["COACHBUS_TOPIC_PREFIX"], stack.env["KAFKA_BOOTSTRAP_SERVERS"]
        )
    finally:
        await stack.stop()
        _print_tracebacks(log_dir)


def _print_tracebacks(log_dir: Path) -> None:
    # Keep a crash visible in CI output: the log files go with the temp dir.
    for path in sorted(log_dir.glob("*.log")):
        text = path.read_text(errors="replace")
        if "Traceback" in text:
            print(f"\n===== {path.name} (tail) =====\n{text[-3000:]}")


def new_prefix(tag: str) -> str:
    return f"{tag}{uuid.uuid4().hex[:8]}."


# --------------------------------------------------------------------------- topics


@dataclass
class Replies:
    """Replies per turn as read from the replies topic."""

    finals: Counter[str] = field(default_factory=Counter)
    coach: Counter[str] = field(default_factory=Counter)
    last_final: dict[str, dict[str, Any]] = field(default_factory=dict)

    def missing(self, turns: Iterable[str]) -> set[str]:
        return {t for t in turns if self.finals[t] == 0}

    def doubled(self) -> dict[str, int]:
        return {t: n for t, n in self.finals.items() if n > 1}

    def doubled_coach(self) -> dict[str, int]:
        return {t: n for t, n in self.coach.items() if n > 1}


async def read_topic(
    bootstrap: str,
    topic: str | tuple[str, ...],
    *,
    until: Any = None,
    timeout: float = 30.0,
    settle: float = 3.0,
) -> list[Any]:
    """Read ``topic`` from the beginning; stop ``settle`` seconds after ``until(records)``
    holds (so a late duplicate is still seen) or after ``timeout``."""
    consumer = AIOKafkaConsumer(
        *((topic,) if isinstance(topic, str) else topic),
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=5,
        max_partition_fetch_bytes=16 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    await consumer.start()
    out: list[Any] = []
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        settle_until: float | None = None
        while loop.time() < end:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                out.extend(records)
            if settle_until is None and until is not None and until(out):
                settle_until = loop.time() + settle
            if settle_until is not None and loop.time() >= settle_until:
                break
    finally:
        await consumer.stop()
    return out


async def replies_for(
    rs: RunningStack, turns: set[str], *, timeout: float = 90.0, settle: float = 3.0
) -> Replies:
    """Finals (on replies) and coach replies (on coach-replies) per turn, once every
    turn has a final (plus ``settle`` seconds to catch a doubled one) or after
    ``timeout``."""

    def parse(records: list[Any]) -> Replies:
        out = Replies()
        for record in records:
            try:
                reply = json.loads(record.value)
            except (TypeError, ValueError):
                continue
            turn = reply.get("turn_id")
            if turn not in turns:
                continue
            if reply.get("kind") == "final":
                out.finals[turn] += 1
                out.last_final[turn] = reply
            elif reply.get("kind") == "coach":
                out.coach[turn] += 1
        return out

    records = await read_topic(
        rs.bootstrap,
        (f"{rs.prefix}replies", f"{rs.prefix}coach-replies"),
        until=lambda recs: not parse(recs).missing(turns),
        timeout=timeout,
        settle=settle,
    )
    return parse(records)


async def produce(
    bootstrap: str, topic: str, items: Iterable[tuple[bytes | None, bytes | None]]
) -> None:
    """Publish raw (key, value) pairs, as a hostile or duplicating producer would."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=16 * 1024 * 1024)
    await producer.start()
    try:
        for key, value in items:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


# --------------------------------------------------------------------------- HTTP


async def post_turn(
    client: httpx.AsyncClient, rs: RunningStack, user: str, text: str, session: str = "s1"
) -> str:
    response = await client.post(
        f"{rs.url}/v1/sessions/{session}/messages", json={"text": text}, headers=rs.headers(user)
    )
    assert response.status_code == 202, response.text
    turn: str = response.json()["turn_id"]
    return turn


def by_event(stream: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, data in stream:
        out[name].append(data)
    return out


# --------------------------------------------------------------------------- LLM simulator


@contextlib.contextmanager
def llm_sim(log_dir: Path, *flags: str) -> Iterator[str]:
    """The LLM simulator as its own process, with fault flags; yields its /v1 URL."""
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"llm-sim-{port}.log", "ab") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "coachbus.cli", "llm-sim", "--host", "127.0.0.1"),
                *("--port", str(port), "--ttft-ms", "5", "--tokens-per-s", "0", *flags),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={k: v for k, v in os.environ.items() if not k.startswith("COACHBUS_")},
        )
    try:
        for _ in range(300):  # ~30 s bound
            if port_open("127.0.0.1", port):
                break
            if proc.poll() is not None:
                raise RuntimeError(f"llm-sim exited with {proc.returncode}")
            time.sleep(0.1)
        else:
            raise TimeoutError("llm-sim did not listen")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def sim_stats(base_url: str) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(f"{base_url}/stats", timeout=5).json()
    return stats


def llm_env(base_url: str, **overrides: str) -> dict[str, str]:
    """Environment that points every agent at ``base_url`` with short LLM timeouts."""
    env = {
        "COACHBUS_LLM_BASE_URL": base_url,
        "COACHBUS_LLM_POLICY_FILE": str(LLM_POLICY),
        "COACHBUS_LLM_DEFAULT_TIMEOUT_S": "2",
        "COACHBUS_LLM_TIMEOUTS_S": json.dumps({"coach": 2.0, "synth": 3.0}),
        "COACHBUS_LLM_CONNECT_TIMEOUT_S": "1",
        "COACHBUS_LLM_RETRY_ATTEMPTS": "2",
        "COACHBUS_LLM_RETRY_WAIT_INITIAL_S": "0.05",
        "COACHBUS_LLM_RETRY_WAIT_MAX_S": "0.1",
        "COACHBUS_LLM_RETRY_WAIT_JITTER_S": "0",
        "COACHBUS_LLM_SEND_PRIORITY": "false",
    }
    env.update(overrides)
    return env
