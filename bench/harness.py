"""The benchmark's moving parts: the LLM simulator as its own process, the embedded
stack, a tap on the user-messages topic and closed-loop users speaking SSE.

Every timestamp compared across processes is a wall-clock ``created_at`` written by
the services on this one machine, so they share one clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
from aiokafka import AIOKafkaConsumer, TopicPartition

from coachbus.embedded.broker import free_port
from coachbus.embedded.stack import Stack, StackConfig
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic

POLICY_FILE = Path(__file__).with_name("policy.toml")
PARALLEL_AGENTS = ("shadow", "persona", "plasticity", "stability", "coach")
STACK_SERVICES = (*PARALLEL_AGENTS, "synth", "gateway")
# Texts that exercise different deterministic paths (goals, setbacks, German, doubt);
# none is a crisis message, so no turn is routed to a human.
TEXTS = (
    "I want to run a half marathon in October, but this week I skipped two runs.",
    "Tomorrow I will run 5 km before work, I promise myself.",
    "Work was stressful again and I ended up on the couch. Why do I always do this?",
    "I finally did a long run on Sunday and felt proud!",
    "Ich möchte mehr schlafen, aber ich scrolle jeden Abend bis Mitternacht.",
    "My sister says I take on too much. Maybe she is right?",
)


# A fixed pure-Python loop, one copy pinned to each core, all at once: how fast this
# machine's cores are right now. On a shared VM that changes within minutes (a loop
# like it took 0.66 to 1.0 s here within an hour, and one core ran 35% slower than
# the other): read the figures of a run together with it.
_LOOP = """
import os, sys, time
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {int(sys.argv[1])})
started = time.perf_counter()
total = 0
for i in range(5_000_000):
    total += i
print(time.perf_counter() - started)
"""


def cpu_loop_s() -> list[float]:
    """Seconds the fixed loop took on each core, every core busy at once."""
    if hasattr(os, "sched_getaffinity"):
        cores = sorted(os.sched_getaffinity(0))
    else:
        cores = list(range(psutil.cpu_count(logical=True) or 1))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _LOOP, str(core)], stdout=subprocess.PIPE, text=True
        )
        for core in cores
    ]
    return [round(float(proc.communicate(timeout=60)[0]), 3) for proc in procs]


def machine() -> dict[str, Any]:
    """What the figures were measured on; printed and stored with the results."""
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "cpu_model": model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": f"{platform.system()} {platform.release()}",
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "cpu_loop_s_at_start": cpu_loop_s(),
    }


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    """User + system CPU seconds of each process so far (NaN once it is gone)."""
    out: dict[str, float] = {}
    for name, proc in procs.items():
        try:
            t = proc.cpu_times()
            out[name] = t.user + t.system
        except psutil.Error:
            out[name] = float("nan")
    return out


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ts(value: str) -> float:
    """An ISO-8601 ``created_at`` as epoch seconds."""
    return datetime.fromisoformat(value).timestamp()


# ---------------------------------------------------------------------- simulator


@dataclass
class SimProcess:
    """``coachbus llm-sim`` in a process of its own, so its event loop (and CPU)
    is neither the benchmark client's nor a service's. Restartable on the same
    port with other latencies while the stack keeps its base URL."""

    port: int = field(default_factory=free_port)
    log_path: Path | None = None
    proc: asyncio.subprocess.Process | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.returncode is None else None

    async def start(
        self,
        *,
        ttft_ms: float = 0.0,
        tokens_per_s: float = 0.0,
        profile: str | None = None,
        time_scale: float = 1.0,
    ) -> None:
        """Flat latency (``ttft_ms``, ``tokens_per_s``) or a hardware ``profile``,
        its clock run ``time_scale`` times as long (0.5 = twice as fast)."""
        await self.stop()
        argv = [
            sys.executable,
            "-m",
            "coachbus.cli",
            "llm-sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--time-scale",
            str(time_scale),
        ]
        if profile is not None:
            self.settings = {"profile": profile, "time_scale": time_scale}
            argv += ["--profile", profile]
        else:
            # No batch slowdown and no admission limit: the latency of a call is the
            # configured one whatever the load, so the ideal is known exactly.
            self.settings = {
                "ttft_ms": ttft_ms,
                "tokens_per_s": tokens_per_s,
                "batch_slowdown": 0.0,
                "time_scale": time_scale,
            }
            argv += ["--ttft-ms", str(ttft_ms), "--tokens-per-s", str(tokens_per_s)]
            argv += ["--batch-slowdown", "0"]
        out: Any = asyncio.subprocess.DEVNULL
        if self.log_path is not None:
            out = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230 - local file, instant
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdout=out, stderr=asyncio.subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(timeout=1.0) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"http://127.0.0.1:{self.port}/health")).is_success:
                        return
                if self.proc.returncode is not None or time.monotonic() > deadline:
                    raise RuntimeError("the LLM simulator did not start")
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def stats(self, *, reset: bool = False) -> dict[str, Any]:
        async with httpx.AsyncClient(timeout=5.0) as client:
            url = f"http://127.0.0.1:{self.port}/stats"
            response = await (client.delete(url) if reset else client.get(url))
            data: dict[str, Any] = response.json()
            return data

    async def call_ms(self, model: str, n: int = 5) -> float:
        """Median wall time of one small chat call made directly to the simulator:
        what one LLM call costs on the critical path, measured now."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Say something short."}],
            "max_tokens": 64,
        }
        times: list[float] = []
        async with httpx.AsyncClient(timeout=60.0) as client:
            for _ in range(n):
                started = time.perf_counter()
                (
                    await client.post(f"{self.base_url}/chat/completions", json=body)
                ).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
        return median(times)


# ---------------------------------------------------------------------- stack


@dataclass
class BenchStack:
    """The embedded stack (own Tansu broker, seven services) wired to the simulator,
    the bench policy and one API key per benchmark user."""

    sim: SimProcess
    replicas: int = 1
    users: int = 64
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="coachbus-bench-")))
    deadline_ms: int = 60_000
    stack: Stack | None = None
    keys: dict[str, str] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"bench{uuid.uuid4().hex[:6]}.")
    started_s: float = 0.0
    # More environment for the services (e.g. LLM timeouts), over the defaults below.
    extra_env: dict[str, str] = field(default_factory=dict)

    async def start(self) -> None:
        self.keys = {
            f"u{i:03d}": f"bench-{i:03d}-{secrets.token_hex(12)}" for i in range(self.users)
        }
        env = {
            "COACHBUS_TOPIC_PREFIX": self.prefix,
            "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in self.keys.items()),
            # Closed-loop users send as fast as the pipeline answers: the gateway's
            # per-user rate limit would measure itself, not the pipeline.
            "COACHBUS_RATE_LIMIT_PER_MINUTE": "1000000",
            # Far above any turn here, so no turn is cut short and counted as done.
            "COACHBUS_TURN_DEADLINE_MS": str(self.deadline_ms),
            "COACHBUS_TURN_WALL_CLOCK_MS": str(self.deadline_ms * 2),
            "COACHBUS_LOG_LEVEL": "WARNING",
            "COACHBUS_LLM_BASE_URL": self.sim.base_url,
            "COACHBUS_LLM_POLICY_FILE": str(POLICY_FILE),
            "OTEL_SDK_DISABLED": "true",
            **self.extra_env,
        }
        replicas = {name: self.replicas for name in (*PARALLEL_AGENTS, "synth")}
        config = StackConfig.ephemeral(env=env, log_dir=self.log_dir, replicas=replicas)
        self.stack = Stack(config)
        started = time.perf_counter()
        await self.stack.start()
        self.started_s = time.perf_counter() - started

    async def stop(self) -> None:
        if self.stack is not None:
            await self.stack.stop()
            self.stack = None

    @property
    def url(self) -> str:
        assert self.stack is not None
        return self.stack.gateway_url

    @property
    def bootstrap(self) -> str:
        assert self.stack is not None
        return self.stack.env["KAFKA_BOOTSTRAP_SERVERS"]

    def processes(self) -> dict[str, psutil.Process]:
        """Every process of the embedded stack by name (services, replicas, broker)."""
        assert self.stack is not None and self.stack.supervisor is not None
        out: dict[str, psutil.Process] = {}
        for name in self.stack.supervisor.names:
            pid = self.stack.supervisor.pid(name)
            if pid is not None:
                with contextlib.suppress(psutil.Error):
                    out[name] = psutil.Process(pid)
        broker_proc = getattr(self.stack.broker, "_proc", None)
        if broker_proc is not None and broker_proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                out["broker"] = psutil.Process(broker_proc.pid)
        return out

    def failures(self) -> str:
        """The tails of service logs that mention a traceback, for error messages."""
        parts = []
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace")
            if "Traceback" in text or "ERROR" in text:
                parts.append(f"== {path.name}\n{text[-2000:]}")
        return "\n".join(parts)


# ---------------------------------------------------------------------- tap


class MessageTap:
    """Reads the user-messages topic to learn each message's ``created_at``: the
    gateway's 202 does not carry it, and the turn's clock starts there."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        self._bootstrap = bootstrap
        self._topic = CoachbusSettings(topic_prefix=prefix).topic(Topic.USER_MESSAGES.value)
        self.created: dict[str, float] = {}
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        kafka = KafkaSettings(bootstrap_servers=self._bootstrap)
        self._consumer = consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.servers, enable_auto_commit=False, fetch_max_wait_ms=50
        )
        await consumer.start()
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(self._topic, p) for p in consumer.partitions_for_topic(self._topic)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        self._task = asyncio.create_task(self._run(consumer))

    async def _run(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        body = json.loads(record.value)
                        turn_id = body["turn_id"]
                        self.created[turn_id] = ts(body["created_at"])
                        waiter = self._waiters.pop(turn_id, None)
                        if waiter is not None and not waiter.done():
                            waiter.set_result(self.created[turn_id])

    async def created_at(self, turn_id: str, timeout: float = 10.0) -> float | None:
        if turn_id in self.created:
            return self.created[turn_id]
        waiter = self._waiters.setdefault(turn_id, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            return None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()


# ---------------------------------------------------------------------- turns


@dataclass
class Turn:
    """One turn as the user saw it (SSE) plus the server-side timestamps."""

    user: str
    text: str
    turn_id: str = ""
    sent_at: float = 0.0  # client wall clock when the POST went out
    client_ms: float = 0.0  # POST sent -> final event received, client monotonic
    done_at: float = 0.0  # when the client had the final (perf_counter)
    message_at: float | None = None
    first_coach_at: float | None = None  # first coach_delta, else the coach reply
    coach_at: float | None = None
    # The first synthesis text the user saw: the first final_delta, else the final.
    first_final_at: float | None = None
    first_final_text: str = ""
    # The first piece the model wrote: after the rendering's opening sentence (a
    # piece of tier "deterministic") when Synth opens with it, else the first piece.
    first_model_final_at: float | None = None
    first_model_final_text: str = ""
    opened: bool = False  # the first piece was the rendering's opening sentence
    final_deltas: int = 0
    final_at: float | None = None
    final: dict[str, Any] | None = None
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    synth_compute_ms: float | None = None

    @property
    def tag(self) -> str:
        """What makes this turn's text unique (the LLM simulator's timeline shows the
        tail of each prompt's user messages, so a turn's calls can be found by it)."""
        return self.text[self.text.rfind("(") :]

    def since_message_ms(self, at: float | None) -> float | None:
        if at is None or self.message_at is None:
            return None
        return (at - self.message_at) * 1000

    @property
    def ok(self) -> bool:
        return self.error is None and self.final_at is not None and self.message_at is not None

    @property
    def turn_ms(self) -> float:
        assert self.final_at is not None and self.message_at is not None
        return (self.final_at - self.message_at) * 1000

    def agent_ms(self, name: str) -> float:
        return float(self.agents[name]["latency_ms"]) if name in self.agents else 0.0

    def llm_calls(self, name: str) -> int:
        if name == "synth":
            # The final's usage sums the agents' usage; what is left over is Synth's own.
            total = int(((self.final or {}).get("usage") or {}).get("llm_calls", 0))
            return max(0, total - sum(self.llm_calls(a) for a in PARALLEL_AGENTS))
        usage = self.agents.get(name, {}).get("usage") or {}
        return int(usage.get("llm_calls", 0))

    def tier(self, name: str) -> str:
        if name == "synth":
            return str((self.final or {}).get("tier", "deterministic"))
        return str(self.agents.get(name, {}).get("tier", "-"))


class Users:
    """Closed-loop users: each sends a message, follows its events until the final
    reply, then sends the next. Only to the local gateway."""

    def __init__(self, stack: BenchStack, tap: MessageTap) -> None:
        self._stack = stack
        self._tap = tap
        self._users = list(stack.keys)
        self._sent: dict[str, int] = {}
        self.client = httpx.AsyncClient(
            base_url=stack.url,
            timeout=httpx.Timeout(120.0, connect=5.0),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=512),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    def user(self, i: int) -> str:
        return self._users[i % len(self._users)]

    async def turn(self, user: str, timeout: float = 120.0) -> Turn:
        n = self._sent.get(user, 0)
        self._sent[user] = n + 1
        # The user in the text too: no two turns of a run have the same text.
        turn = Turn(user=user, text=f"{TEXTS[n % len(TEXTS)]} ({user}, turn {n + 1})")
        headers = {"Authorization": f"Bearer {self._stack.keys[user]}"}
        turn.sent_at = time.time()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                response = await self.client.post(
                    f"/v1/sessions/s-{user}/messages", json={"text": turn.text}, headers=headers
                )
                if response.status_code != 202:
                    turn.error = f"POST {response.status_code}: {response.text[:200]}"
                    return turn
                turn.turn_id = response.json()["turn_id"]
                await self._follow(turn, headers)
        except (TimeoutError, httpx.HTTPError) as exc:
            turn.error = f"{type(exc).__name__}: {exc}"
        turn.done_at = time.perf_counter()
        turn.client_ms = (turn.done_at - started) * 1000
        turn.message_at = await self._tap.created_at(turn.turn_id) if turn.turn_id else None
        if turn.error is None and turn.final_at is None:
            turn.error = "the event stream ended without a final reply"
        return turn

    async def _follow(self, turn: Turn, headers: dict[str, str]) -> None:
        url = f"/v1/turns/{turn.turn_id}/events"
        async with self.client.stream("GET", url, headers=headers) as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    data = json.loads(line[6:])
                    if event == "agent":
                        turn.agents[data["agent"]] = data
                    elif event in ("coach_delta", "coach"):
                        if turn.first_coach_at is None:
                            turn.first_coach_at = ts(data["created_at"])
                        if event == "coach":
                            turn.coach_at = ts(data["created_at"])
                    elif event == "final_delta":
                        turn.final_deltas += 1
                        if turn.first_final_at is None:
                            turn.first_final_at = ts(data["created_at"])
                            turn.first_final_text = str(data.get("text", ""))
                            turn.opened = data.get("tier") == "deterministic"
                        if turn.first_model_final_at is None and data.get("tier") != (
                            "deterministic"
                        ):
                            turn.first_model_final_at = ts(data["created_at"])
                            turn.first_model_final_text = str(data.get("text", ""))
                    elif event == "final":
                        turn.final = data
                        turn.final_at = ts(data["created_at"])
                        if turn.first_final_at is None:
                            turn.first_final_at = turn.final_at
                        return
                    elif event == "timeout":
                        turn.error = "gateway gave up waiting for the final reply"
                        return
                    event = ""


async def closed_loop(
    users: Users,
    n_users: int,
    *,
    max_turns: int,
    duration_s: float,
    turn_timeout: float = 120.0,
    stagger_s: float = 0.0,
) -> tuple[list[Turn], float]:
    """``n_users`` closed-loop users until ``max_turns`` turns were started or
    ``duration_s`` passed (new turns stop then; running ones finish, bounded by
    ``turn_timeout``). User ``i`` starts ``i * stagger_s`` after the first. Returns
    the turns and the elapsed seconds."""
    turns: list[Turn] = []
    started = time.perf_counter()
    budget = [max_turns]

    async def one(i: int) -> None:
        if stagger_s:
            await asyncio.sleep(i * stagger_s)
        user = users.user(i)
        while budget[0] > 0 and time.perf_counter() - started < duration_s:
            budget[0] -= 1
            turns.append(await users.turn(user, turn_timeout))

    await asyncio.gather(*(one(i) for i in range(n_users)))
    return turns, time.perf_counter() - started


@contextlib.asynccontextmanager
async def running(stack: BenchStack) -> AsyncIterator[tuple[Users, MessageTap]]:
    """The stack started, with its tap and users; all stopped on the way out."""
    await stack.start()
    tap = MessageTap(stack.bootstrap, stack.prefix)
    users: Users | None = None
    try:
        await tap.start()
        users = Users(stack, tap)
        yield users, tap
    finally:
        if users is not None:
            await users.aclose()
        await tap.stop()
        await stack.stop()
