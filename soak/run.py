"""The soak run: drive, sample, count, report. Bounded in users, turns and time."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import secrets
import statistics
import tempfile
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from coachbus.embedded.stack import Stack, StackConfig

RESULTS = Path(__file__).parent / "results"
MAX_USERS = 200
MAX_MINUTES = 240.0
# A service's memory is "flat" when the mean of the last third of its samples is at
# most this much above the first third's (relative, plus a fixed slack for the
# allocator's steps, which a short run cannot average out).
FLAT_RATIO = 0.15
FLAT_SLACK_MB = 24.0
# The bounded memories that fill with one entry per turn until their capacity (the
# defaults in the code they name): a process whose memory grows while one of them is
# still filling is not leaking, it is reaching its declared bound. Its flatness is
# judged from the moment the last of them is full, when enough of the run is left.
BOUNDED_CACHES: dict[str, tuple[tuple[str, int], ...]] = {
    # services/gateway/turns.py (COACHBUS_TURN_CACHE_TURNS) and the review queue's
    # memory of answered reviews (services/gateway/review.py).
    "gateway": (("turn cache", 10_000),),
    # services/synth/join.py: the turns it finalised; coachbus.bus.consume.AnsweredTurns.
    "synth": (("finalised turns", 50_000), ("answered turns", 50_000)),
    **{
        agent: (("answered turns", 50_000),)
        for agent in ("shadow", "persona", "plasticity", "stability", "coach")
    },
}
# The share of the samples that must be left after the caches filled to judge them.
JUDGE_SHARE = 0.25
# The log line of a reader that found its partitions recreated (coachbus.bus.state).
REWIND_LINE = "partitions recreated under a reader"

TEXTS = [
    "I want to write my thesis but I keep scrolling instead.",
    "Today I went for a run before work, finally!",
    "Ich will jeden Morgen zehn Minuten Spanisch lernen.",
    "I skipped the gym again, too tired after work.",
    "I'd like to call my parents every Sunday.",
    "Heute habe ich es nicht geschafft, früh ins Bett zu gehen.",
    "I keep putting off the tax return.",
    "I want to read twenty pages every evening.",
]


@dataclass
class SoakConfig:
    users: int = 8
    seconds: float = 300.0
    # Pause between a user's final and their next message (a person reading).
    think_s: float = 0.5
    # Bound on turns per user, whatever the speed of the machine.
    max_turns_per_user: int = 2_000
    llm: str = "none"  # none | sim
    bootstrap: str | None = None  # None: the stack's own embedded broker
    # Partitions per topic (see --partitions).
    partitions: int = 6
    deadline_ms: int = 15_000
    sample_s: float = 2.0
    log_dir: Path | None = None
    results_dir: Path | None = RESULTS

    def __post_init__(self) -> None:
        if not 1 <= self.users <= MAX_USERS:
            raise ValueError(f"users must be within 1..{MAX_USERS}")
        if not 1 <= self.seconds <= MAX_MINUTES * 60:
            raise ValueError(f"the run must last 1 s .. {MAX_MINUTES} min")
        if self.llm not in ("none", "sim"):
            raise ValueError("llm is none or sim")
        if not 1 <= self.partitions <= 256:
            raise ValueError("partitions must be within 1..256")


@dataclass
class ServiceMemory:
    samples_mb: list[tuple[float, float]] = field(default_factory=list)  # (t, MB)
    first_third_mb: float = 0.0
    last_third_mb: float = 0.0
    flat: bool = True
    # "flat", "GROWING", or "filling": still reaching a declared bound (see
    # BOUNDED_CACHES), with ``filling`` naming it and how full it was at the end.
    verdict: str = "flat"
    filling: str = ""
    # From when on it was judged (s into the run): after its caches were full.
    judged_from_s: float = 0.0


@dataclass
class Third:
    """One third of the run: turns answered in it, their rate and latency."""

    answered: int
    per_s: float
    p50_ms: float | None
    p99_ms: float | None


@dataclass
class SoakReport:
    users: int
    seconds: float
    accepted: int
    rejected: int
    answered: int
    lost: int
    doubled: int
    gateway_timeouts: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    degraded: int
    restarts: dict[str, int]
    memory: dict[str, ServiceMemory]
    thirds: list[Third] = field(default_factory=list)
    rewinds: dict[str, int] = field(default_factory=dict)
    # The embedded broker's memory growth per answered turn (it keeps everything).
    broker_kb_per_turn: float | None = None
    # What the pipeline writes per answered turn, by topic (prefix dropped):
    # (records, KB), from the topics' end offsets and a sample of their records.
    log_per_turn: dict[str, tuple[float, float]] = field(default_factory=dict)
    lost_turns: list[str] = field(default_factory=list)
    doubled_turns: dict[str, int] = field(default_factory=dict)
    result_file: str | None = None

    @property
    def throughput_ratio(self) -> float | None:
        """Turns per second of the last third over the first (1.0: as fast as it began)."""
        if len(self.thirds) < 3 or not self.thirds[0].per_s:
            return None
        return round(self.thirds[-1].per_s / self.thirds[0].per_s, 3)

    @property
    def p99_ratio(self) -> float | None:
        if len(self.thirds) < 3 or not self.thirds[0].p99_ms or self.thirds[-1].p99_ms is None:
            return None
        return round(self.thirds[-1].p99_ms / self.thirds[0].p99_ms, 3)

    @property
    def ok(self) -> bool:
        # What is wrong: a turn lost or answered twice, memory that grows once every
        # bounded cache is full, a restart, a reader that rewound its state without
        # the broker having lost it. Not wrong: a cache filling up to its bound.
        return (
            self.lost == 0
            and self.doubled == 0
            and all(m.verdict != "GROWING" for m in self.memory.values())
            and not any(self.restarts.values())
            and not any(self.rewinds.values())
        )

    def summary(self) -> str:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.0f} ms"

        lines = [
            f"soak: {self.users} users for {self.seconds:.0f} s",
            f"  turns accepted {self.accepted}, answered {self.answered}, "
            f"rejected (429/5xx) {self.rejected}, degraded {self.degraded}",
            f"  latency p50 {ms(self.p50_ms)}, p99 {ms(self.p99_ms)}, max {ms(self.max_ms)}",
            f"  lost turns {self.lost} (must be 0), doubled finals {self.doubled} (must be 0)",
            f"  state rewinds {sum(self.rewinds.values())} (must be 0) {self.rewinds or ''}",
            "  per third: turns/s, p50, p99:",
        ]
        for i, third in enumerate(self.thirds, 1):
            lines.append(
                f"    {i}: {third.answered} turns, {third.per_s:.2f}/s, "
                f"p50 {ms(third.p50_ms)}, p99 {ms(third.p99_ms)}"
            )
        if self.throughput_ratio is not None:
            lines.append(
                f"  last third / first: throughput x{self.throughput_ratio}, p99 x{self.p99_ratio}"
            )
        lines.append("  memory (RSS, first third -> last third of the judged samples):")
        for name, mem in sorted(self.memory.items()):
            note = f"  {mem.filling}" if mem.filling else ""
            since = f", from {mem.judged_from_s:.0f} s" if mem.judged_from_s else ""
            lines.append(
                f"    {name:<11} {mem.first_third_mb:7.1f} MB -> {mem.last_third_mb:7.1f} MB"
                f"  {mem.verdict}  ({len(mem.samples_mb)} samples{since}){note}"
            )
        if self.broker_kb_per_turn is not None:
            lines.append(
                f"  embedded broker: +{self.broker_kb_per_turn} KB per turn (it keeps every "
                "record; see docs/deploy.md)"
            )
        if self.log_per_turn:
            records = sum(r for r, _ in self.log_per_turn.values())
            kb = sum(k for _, k in self.log_per_turn.values())
            lines.append(f"  written per turn: {records:.1f} records, {kb:.1f} KB; largest:")
            ranked = sorted(self.log_per_turn.items(), key=lambda kv: -kv[1][1])
            for topic, (r, k) in ranked[:6]:
                lines.append(f"    {topic:<28} {r:6.2f} records  {k:7.2f} KB")
        if any(self.restarts.values()):
            lines.append(f"  restarts: {self.restarts}")
        lines.append(f"  result: {'OK' if self.ok else 'FAILED'}")
        if self.result_file:
            lines.append(f"  written to {self.result_file}")
        return "\n".join(lines)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    # Nearest rank: the smallest value with at least q of the samples at or below it.
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def judge_memory(name: str, mem: ServiceMemory, answered_at: list[float]) -> None:
    """Flat, GROWING, or filling: judged on the samples taken after the process's
    bounded caches were full (``answered_at``: when each turn was answered, seconds
    into the run), if at least ``JUDGE_SHARE`` of the run is left by then."""
    caches = BOUNDED_CACHES.get(name, ())
    ordered = sorted(answered_at)
    full_at = 0.0
    unfilled: list[str] = []
    for label, capacity in caches:
        if len(ordered) >= capacity:
            full_at = max(full_at, ordered[capacity - 1])
        else:
            unfilled.append(f"{label} {len(ordered):,}/{capacity:,}")
    samples = [(t, mb) for t, mb in mem.samples_mb if t >= full_at]
    if unfilled or len(samples) < JUDGE_SHARE * max(1, len(mem.samples_mb)):
        # Still reaching a declared bound: the growth is reported, not failed.
        mem.first_third_mb, mem.last_third_mb, flat = flatness(mem.samples_mb)
        mem.verdict = "flat" if flat else "filling"
        mem.filling = "filling: " + ", ".join(unfilled) if unfilled else ""
        return
    mem.judged_from_s = full_at
    mem.first_third_mb, mem.last_third_mb, mem.flat = flatness(samples)
    mem.verdict = "flat" if mem.flat else "GROWING"


def thirds(done: list[tuple[float, float]], run_s: float) -> list[Third]:
    """(answered at s, latency ms) per turn, split into the run's three thirds."""
    out: list[Third] = []
    third = run_s / 3
    for i in range(3):
        lat = [ms for t, ms in done if i * third <= t < (i + 1) * third or (i == 2 and t >= run_s)]
        out.append(
            Third(
                answered=len(lat),
                per_s=round(len(lat) / third, 3) if third else 0.0,
                p50_ms=percentile(lat, 0.50),
                p99_ms=percentile(lat, 0.99),
            )
        )
    return out


def broker_growth(mem: ServiceMemory | None, turns: int) -> float | None:
    """KB of broker memory per answered turn: last sample minus first, over the
    turns between (the embedded broker never compacts nor deletes)."""
    if mem is None or len(mem.samples_mb) < 2 or not turns:
        return None
    first, last = mem.samples_mb[0][1], mem.samples_mb[-1][1]
    return round((last - first) * 1024 / turns, 2)


def count_rewinds(log_dir: Path) -> dict[str, int]:
    """Readers that re-read their state from the start, per service, from its log."""
    out: dict[str, int] = {}
    for path in sorted(log_dir.glob("*.log")):
        n = path.read_text(errors="replace").count(REWIND_LINE)
        if n:
            out[path.stem] = n
    return out


def flatness(samples: list[tuple[float, float]]) -> tuple[float, float, bool]:
    values = [mb for _t, mb in samples]
    if len(values) < 3:
        return (values[0] if values else 0.0, values[-1] if values else 0.0, True)
    third = len(values) // 3
    first = statistics.fmean(values[:third])
    last = statistics.fmean(values[-third:])
    return first, last, last <= first * (1 + FLAT_RATIO) + FLAT_SLACK_MB


class _Run:
    def __init__(self, config: SoakConfig, stack: Stack, keys: dict[str, str]) -> None:
        self.config = config
        self.stack = stack
        self.keys = keys
        self.accepted: dict[str, float] = {}  # turn -> time accepted
        self.latencies_ms: list[float] = []
        # (seconds into the run when answered, latency ms), for the thirds.
        self.done: list[tuple[float, float]] = []
        self.t0 = 0.0
        self.rejected = 0
        self.gateway_timeouts = 0
        self.memory: dict[str, ServiceMemory] = {}

    async def user(self, client: httpx.AsyncClient, name: str, end: float) -> None:
        loop = asyncio.get_running_loop()
        headers = {"Authorization": f"Bearer {self.keys[name]}"}
        url = self.stack.gateway_url
        for n in range(self.config.max_turns_per_user):
            if loop.time() >= end:
                return
            text = TEXTS[(n + int(name[1:])) % len(TEXTS)]
            started = loop.time()
            try:
                response = await client.post(
                    f"{url}/v1/sessions/soak-{name}/messages", json={"text": text}, headers=headers
                )
            except httpx.HTTPError:
                self.rejected += 1
                await asyncio.sleep(1.0)
                continue
            if response.status_code != 202:
                self.rejected += 1
                await asyncio.sleep(1.0)
                continue
            turn = response.json()["turn_id"]
            self.accepted[turn] = started
            final = await self.wait_final(client, url, turn, headers)
            if final:
                now = loop.time()
                self.latencies_ms.append((now - started) * 1000)
                self.done.append((now - self.t0, (now - started) * 1000))
            else:
                self.gateway_timeouts += 1
            await asyncio.sleep(self.config.think_s)

    async def wait_final(
        self, client: httpx.AsyncClient, url: str, turn: str, headers: dict[str, str]
    ) -> bool:
        timeout = self.config.deadline_ms / 1000 * 3 + 30
        with contextlib.suppress(httpx.HTTPError):
            async with client.stream(
                "GET", f"{url}/v1/turns/{turn}/events", headers=headers, timeout=timeout
            ) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: final"):
                        return True
                    if line.startswith("event: timeout"):
                        return False
        return False

    async def sample(self, stop: asyncio.Event) -> None:
        supervisor = self.stack.supervisor
        assert supervisor is not None
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        broker = self.stack.broker
        while not stop.is_set():
            pids = {name: supervisor.pid(name) for name in supervisor.names}
            if broker is not None:
                # The embedded broker keeps every record in memory (no compaction, no
                # retention): its growth is measured, not judged (see broker_growth).
                pids["broker"] = broker.pid
            for name, pid in pids.items():
                mb = rss_mb(pid) if pid else None
                if mb is not None:
                    mem = self.memory.setdefault(name, ServiceMemory())
                    mem.samples_mb.append((round(loop.time() - t0, 2), round(mb, 1)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.sample_s)


async def count_finals(
    bootstrap: str, topic: str, turns: set[str], timeout: float, settle: float = 3.0
) -> tuple[Counter[str], int]:
    """Finals per turn on the replies topic; stops ``settle`` s after all arrived."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=5
    )
    await consumer.start()
    counts: Counter[str] = Counter()
    degraded = 0
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        settle_until: float | None = None
        while loop.time() < end:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    with contextlib.suppress(ValueError, TypeError):
                        reply = json.loads(record.value)
                        if reply.get("kind") == "final" and reply.get("turn_id") in turns:
                            counts[reply["turn_id"]] += 1
                            degraded += bool(reply.get("degraded"))
            if settle_until is None and turns <= set(counts):
                settle_until = loop.time() + settle
            if settle_until is not None and loop.time() >= settle_until:
                break
    finally:
        await consumer.stop()
    return counts, degraded


# Records read per partition to estimate a topic's mean record size.
CENSUS_SAMPLE = 200


async def topic_census(bootstrap: str, prefix: str, turns: int) -> dict[str, tuple[float, float]]:
    """Records and KB each topic of this run holds per answered turn.

    The count comes from ListOffsets, which the embedded broker answers a few records
    behind (bench/README.md): negligible against thousands of turns. The size is the
    mean of the last records of each partition (key, value and headers), not all of
    them, so the census costs the same after ten minutes as after ten hours."""
    if turns <= 0:
        return {}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        topics = sorted(t for t in await admin.list_topics() if t.startswith(prefix))
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    partitions = {
        d["topic"]: [TopicPartition(d["topic"], p["partition"]) for p in d["partitions"]]
        for d in described
    }
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    out: dict[str, tuple[float, float]] = {}
    try:
        for topic, parts in sorted(partitions.items()):
            if not parts:
                continue
            consumer.assign(parts)
            ends = await consumer.end_offsets(parts)
            count = sum(ends.values())
            sizes: list[int] = []
            for tp in parts:
                consumer.seek(tp, max(0, ends[tp] - CENSUS_SAMPLE))
            want = sum(min(CENSUS_SAMPLE, e) for e in ends.values())
            loop = asyncio.get_running_loop()
            until = loop.time() + 10
            while len(sizes) < want and loop.time() < until:
                batch = await consumer.getmany(timeout_ms=200, max_records=1000)
                for records in batch.values():
                    sizes += [
                        len(r.key or b"")
                        + len(r.value or b"")
                        + sum(len(k) + len(v or b"") for k, v in r.headers)
                        for r in records
                    ]
            mean = statistics.fmean(sizes) if sizes else 0.0
            out[topic.removeprefix(prefix)] = (
                round(count / turns, 2),
                round(count * mean / 1024 / turns, 2),
            )
    finally:
        await consumer.stop()
    return out


async def run_soak(config: SoakConfig) -> SoakReport:
    prefix = f"soak{uuid.uuid4().hex[:6]}."
    keys = {f"u{i}": f"soak-{i}-{secrets.token_urlsafe(12)}" for i in range(config.users)}
    log_dir = config.log_dir or Path(tempfile.mkdtemp(prefix="coachbus-soak-"))
    env = {
        "COACHBUS_TOPIC_PREFIX": prefix,
        "COACHBUS_PARTITIONS": str(config.partitions),
        "COACHBUS_API_KEYS": ",".join(f"{u}:{k}" for u, k in keys.items()),
        "COACHBUS_TURN_DEADLINE_MS": str(config.deadline_ms),
        # The soak measures the pipeline, not the per-key limit in front of it.
        "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
        "COACHBUS_LOG_LEVEL": "WARNING",
    }
    stack = Stack(
        StackConfig.ephemeral(bootstrap=config.bootstrap, log_dir=log_dir, env=env, llm=config.llm)
    )
    await stack.start()
    try:
        run = _Run(config, stack, keys)
        stop = asyncio.Event()
        sampler = asyncio.create_task(run.sample(stop))
        loop = asyncio.get_running_loop()
        started = run.t0 = loop.time()
        end = started + config.seconds
        limits = httpx.Limits(max_connections=config.users * 2 + 8)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            await asyncio.gather(*(run.user(client, name, end) for name in keys))
        elapsed = loop.time() - started
        stop.set()
        await sampler
        bootstrap = stack.env["KAFKA_BOOTSTRAP_SERVERS"]
        counts, degraded = await count_finals(
            bootstrap, f"{prefix}replies", set(run.accepted), timeout=60
        )
        census = await topic_census(bootstrap, prefix, len(counts))
        supervisor = stack.supervisor
        assert supervisor is not None
        restarts = {name: supervisor.restarts(name) for name in supervisor.names}
    finally:
        await stack.stop()

    answered_at = [t for t, _ms in run.done]
    broker = run.memory.pop("broker", None)
    for name, mem in run.memory.items():
        judge_memory(name, mem, answered_at)
    lost = sorted(set(run.accepted) - set(counts))
    doubled = {t: n for t, n in counts.items() if n > 1}
    report = SoakReport(
        users=config.users,
        seconds=round(elapsed, 1),
        accepted=len(run.accepted),
        rejected=run.rejected,
        answered=len(counts),
        lost=len(lost),
        doubled=len(doubled),
        gateway_timeouts=run.gateway_timeouts,
        p50_ms=percentile(run.latencies_ms, 0.50),
        p99_ms=percentile(run.latencies_ms, 0.99),
        max_ms=max(run.latencies_ms) if run.latencies_ms else None,
        degraded=degraded,
        restarts=restarts,
        memory=run.memory,
        thirds=thirds(run.done, elapsed),
        rewinds=count_rewinds(log_dir),
        broker_kb_per_turn=broker_growth(broker, len(run.done)),
        log_per_turn=census,
        lost_turns=lost[:50],
        doubled_turns=dict(list(doubled.items())[:50]),
    )
    if config.results_dir is not None:
        config.results_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = config.results_dir / f"soak-{stamp}-{config.users}u.json"
        body = {"config": _jsonable(asdict(config)), "ok": report.ok, **asdict(report)}
        path.write_text(json.dumps(body, indent=1) + "\n")
        report.result_file = str(path)
    return report


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in values.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--users", type=int, default=8, help=f"simulated users (1..{MAX_USERS})")
    parser.add_argument("--minutes", type=float, default=5.0, help="how long to drive")
    parser.add_argument("--think-ms", type=float, default=500.0, help="pause between turns")
    parser.add_argument("--llm", choices=["none", "sim"], default="none")
    parser.add_argument(
        "--partitions",
        type=int,
        default=6,
        help="partitions per topic (the embedded broker's cost per request grows with a "
        "partition's length: more partitions, slower growth)",
    )
    parser.add_argument("--bootstrap", default=None, help="an external broker (default: embedded)")
    parser.add_argument("--results", default=str(RESULTS), help="where the JSON report goes")
    parser.add_argument("--log-dir", default=None, help="service logs (default: a temp dir)")
    args = parser.parse_args(argv)
    try:
        config = SoakConfig(
            users=args.users,
            seconds=args.minutes * 60,
            think_s=args.think_ms / 1000,
            llm=args.llm,
            bootstrap=args.bootstrap,
            partitions=args.partitions,
            results_dir=Path(args.results),
            log_dir=Path(args.log_dir) if args.log_dir else None,
        )
    except ValueError as exc:
        parser.error(str(exc))
    report = asyncio.run(run_soak(config))
    print(report.summary())
    return 0 if report.ok else 1
