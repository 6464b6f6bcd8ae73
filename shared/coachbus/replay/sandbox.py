"""The sandbox a replay runs in: the candidate pipeline on topics of its own.

Its own topic prefix, the candidate policy, prompts and LLM, no gateway: nothing a
replay does reaches a live topic or a user. Each user's recorded turns are sent
again in order, one after the other, so their state is rebuilt as it was; users
run side by side up to a bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from coachbus.contracts import UserMessage
from coachbus.replay.diff import turn_diff
from coachbus.replay.record import Recorded
from coachbus.roster import AGENT_SERVICES
from coachbus.topics import AGENT_TOPICS, Topic


def candidate_env(
    prefix: str, *, policy: Path | None, prompts: Path | None, llm_base_url: str | None
) -> dict[str, str]:
    """The sandbox's environment: its topic prefix and the candidate's settings."""
    env = {"COACHBUS_TOPIC_PREFIX": prefix, "COACHBUS_LOG_LEVEL": "WARNING"}
    if policy:
        env["COACHBUS_LLM_POLICY_FILE"] = str(policy.resolve())
    if llm_base_url:
        env["COACHBUS_LLM_BASE_URL"] = llm_base_url
    if prompts:
        env["COACHBUS_LLM_PROMPTS_DIR"] = str(prompts.resolve())
    return env


class _Tap:
    """Collects the sandbox's agent results and finals by turn id."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self.bootstrap, self.prefix = bootstrap, prefix
        self.results: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.finals: dict[str, dict[str, Any]] = {}
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._consumer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
        )
        await consumer.start()
        await consumer._client.force_metadata_update()
        names = [self.prefix + Topic.REPLIES.value] + [
            self.prefix + t.value for t in AGENT_TOPICS.values()
        ]
        tps = [TopicPartition(n, p) for n in names for p in consumer.partitions_for_topic(n) or ()]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        reply_topic = self.prefix + Topic.REPLIES.value
        while True:
            batch = await self._consumer.getmany(timeout_ms=200)
            for tp, records in batch.items():
                for record in records:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        value = json.loads(record.value)
                        if tp.topic == reply_topic:
                            if value.get("kind") == "final":
                                self.finals[value["turn_id"]] = value
                        else:
                            agent = tp.topic.removeprefix(self.prefix + "agent.")
                            self.results[value["turn_id"]][agent] = value
            if batch:
                self.changed.set()

    async def final(self, turn_id: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while turn_id not in self.finals:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        # The agents' results are published before Synth's final; give a late one a beat.
        await asyncio.sleep(0.05)
        return self.finals[turn_id]

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


def _fresh(message: dict[str, Any], deadline_ms: int) -> UserMessage:
    """The recorded message as a new turn of the sandbox: same user, session and
    text, a new turn id and a fresh budget (the recorded deadline has passed)."""
    from coachbus.settings import CoachbusSettings

    settings = CoachbusSettings()
    return UserMessage.create(
        user_id=str(message["user_id"]),
        session_id=str(message["session_id"]),
        text=str(message["text"]),
        deadline_ms=deadline_ms,
        max_tokens=settings.turn_token_budget,
        wall_clock_ms=settings.turn_wall_clock_ms,
        earlier=message.get("language"),
    )


async def replay_users(
    todo: Mapping[str, Sequence[Recorded]],
    *,
    prefix: str,
    env: dict[str, str],
    bootstrap: str | None,
    llm: str,
    separate: bool,
    log_dir: Path,
    concurrency: int,
    turn_deadline_ms: int,
    turn_timeout: float,
    on_turn: Callable[[], None],
    on_user: Callable[[str, list[dict[str, Any]]], None],
) -> None:
    """Send each user's recorded turns through the sandbox, in order, and hand each
    turn's diff on: ``on_turn`` after every turn, ``on_user`` with a user's diffs once
    their whole history is replayed."""
    from aiokafka import AIOKafkaProducer

    from coachbus.bus.codec import encode
    from coachbus.embedded.stack import Stack, StackConfig

    agents = AGENT_SERVICES
    # The broker and the LLM (if any) from the embedded stack; the six agents in one
    # process (coachbus.embedded.one_process) unless ``separate`` asks for one each.
    config = StackConfig.ephemeral(
        bootstrap=bootstrap,
        env=env,
        log_dir=log_dir,
        services=agents if separate else (),
        llm=llm,
    )
    stack = Stack(config)
    await stack.start()
    assert stack.env is not None
    sandbox_bootstrap = stack.env["KAFKA_BOOTSTRAP_SERVERS"]
    one_process = None
    if not separate:
        try:
            one_process = await _start_one_process(stack.env, log_dir, agents)
        except BaseException:
            await stack.stop()
            raise
    tap = _Tap(sandbox_bootstrap, prefix)
    producer = AIOKafkaProducer(bootstrap_servers=sandbox_bootstrap)
    await producer.start()
    await tap.start()
    gate = asyncio.Semaphore(concurrency)

    async def one_user(user: str, history: Sequence[Recorded]) -> None:
        async with gate:
            mine: list[dict[str, Any]] = []
            for base in history:
                msg = _fresh(base.message, turn_deadline_ms)
                started = time.monotonic()
                await producer.send_and_wait(
                    prefix + Topic.USER_MESSAGES.value, encode(msg), key=user.encode()
                )
                final = await tap.final(msg.turn_id, turn_timeout)
                latency = time.monotonic() - started if final is not None else None
                mine.append(turn_diff(base, dict(tap.results.get(msg.turn_id, {})), final, latency))
                on_turn()
            on_user(user, mine)

    try:
        await asyncio.gather(*(one_user(u, turns) for u, turns in todo.items()))
    finally:
        await tap.stop()
        await producer.stop()
        if one_process is not None:
            await _stop_one_process(one_process)
        await stack.stop()


async def _start_one_process(
    env: dict[str, str], log_dir: Path, agents: Sequence[str]
) -> asyncio.subprocess.Process:
    """The six agents in one child process; returns once all of them consume."""
    log = _open_log(log_dir / "agents.log")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "coachbus.embedded.one_process",
        *agents,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    log.close()
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(120):
            while True:
                line = await proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the sandbox's agents exited; see {log_dir / 'agents.log'}")
                if line.strip() == b"ready":
                    return proc
    except BaseException:
        await _stop_one_process(proc)
        raise


def _open_log(path: Path) -> io.BufferedWriter:
    # A one-off local call before the agents start: not worth a worker thread.
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("ab")


async def _stop_one_process(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            async with asyncio.timeout(15):
                await proc.wait()
        except TimeoutError:
            proc.kill()
            await proc.wait()
