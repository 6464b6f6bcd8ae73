"""``python -m bench [--quick] [--name NAME] [--out DIR]``: run every measurement,
print the table, write ``<out>/<name>.json``, ``waterfall.png`` and ``throughput.png``.

Phases (each loop bounded in turns and in time; traffic only to 127.0.0.1):

A. one replica per agent, simulator instant (0 ms to first token, infinite tokens/s):
   idle CPU and memory, orchestration overhead (turns one after another), then a
   load of many turns for CPU per turn and memory after half and all of them;
B. same stack, simulator at a fixed latency per call: critical-path efficiency and
   the Coach's reply latency beyond the time to first token;
C. same stack, simulator at the "slow LLM" latency: throughput at 1, 8, 64 users;
D. the handler profile in a process of its own (simulator instant again);
E. a second stack with two replicas per agent: throughput again;
F. prompts, in process: shared-prefix ratio and prompt tokens over one history;
G. a fresh stack against the simulator's hardware profiles (Qwen3-30B on 2x RTX 4090,
   Qwen3-235B on 8x A40): Coach first text, first and full synthesis for 1 and 16
   users beside the seed's sequential design on the same profile (bench/latency.py).

``--only latency`` runs phase G alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from bench import latency, prompts, report
from bench.harness import (
    PARALLEL_AGENTS,
    BenchStack,
    SimProcess,
    Turn,
    Users,
    closed_loop,
    cpu_loop_s,
    cpu_seconds,
    machine,
    median,
    running,
    ts,
)
from coachbus.settings import KafkaSettings

log = logging.getLogger("bench")
RESULTS = Path(__file__).with_name("results")
SMALL_MODEL = "Qwen/Qwen3-30B-A3B"


@dataclass(frozen=True)
class Plan:
    """How much of each measurement to run; ``quick`` is for the smoke test only."""

    warmup_turns: int
    overhead_turns: int
    overhead_max_s: float
    load_turns: int
    load_users: int
    load_max_s: float
    idle_s: float
    idle_settle_s: float
    fixed_llm_ms: float
    fixed_turns: int
    fixed_max_s: float
    slow_llm_ms: float
    levels: tuple[int, ...]
    level_s: float
    profile_turns: int
    prompt_turns: int
    latency_profiles: tuple[str, ...]
    latency_users: int
    latency_turns_one: int
    latency_rounds: int
    # The simulated clock of phase G (1.0 = real time; see bench/latency.py).
    latency_scale: float
    # How long one turn of phase G may take before the phase fails: a 235B turn
    # under 16 users takes tens of seconds at real time; the quick run's clock is
    # 100x faster, so a turn that takes a minute there is lost, not slow.
    latency_turn_timeout_s: float
    # Throughput on stacks started fresh (comparable figures, see ``run``) or, in the
    # smoke test, the one-replica level on the stack the first phases used: its
    # figures mean nothing at that size, and a fresh stack costs ~10 s to start and stop.
    fresh_throughput_stacks: bool = True

    @classmethod
    def full(cls) -> Plan:
        return cls(
            warmup_turns=6,
            overhead_turns=100,
            overhead_max_s=120,
            load_turns=1000,
            load_users=16,
            load_max_s=300,
            idle_s=5,
            idle_settle_s=KafkaSettings().fetch_idle_after_s + 1,
            fixed_llm_ms=300,
            # 40 turns and 40 s windows: on a small shared VM the speed drifts within
            # minutes, and the 20-turn p50s and 20 s windows moved by more than
            # the gaps to their targets from one run to the next.
            fixed_turns=40,
            fixed_max_s=150,
            slow_llm_ms=2000,
            levels=(1, 8, 64),
            level_s=40,
            profile_turns=40,
            prompt_turns=1000,
            latency_profiles=("qwen3-30b-2x4090", "qwen3-235b-a40"),
            latency_users=16,
            latency_turns_one=10,
            latency_rounds=3,
            latency_scale=1.0,
            latency_turn_timeout_s=600.0,
        )

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            warmup_turns=1,
            overhead_turns=3,
            overhead_max_s=10,
            load_turns=6,
            load_users=3,
            load_max_s=10,
            idle_s=0.5,
            idle_settle_s=0.0,
            fixed_llm_ms=50,
            fixed_turns=2,
            fixed_max_s=10,
            slow_llm_ms=100,
            levels=(1, 3),
            level_s=0.5,
            profile_turns=1,
            prompt_turns=12,
            # One profile is enough to smoke the path; the unit tests load them all.
            latency_profiles=("qwen3-30b-2x4090",),
            latency_users=2,
            latency_turns_one=1,
            latency_rounds=1,
            latency_scale=0.01,
            latency_turn_timeout_s=60.0,
            fresh_throughput_stacks=False,
        )


# ---------------------------------------------------------------------- analysis


def synth_compute_ms(turn: Turn) -> float:
    """Synth's deterministic work for this turn (join to decision sheet to prose),
    timed here on the turn's own agent results: the Synth part of the critical path
    when its prose comes from the deterministic tier."""
    from coachbus.contracts import AgentResultAdapter, UserMessage
    from services.synth import logic

    results = {name: AgentResultAdapter.validate_python(data) for name, data in turn.agents.items()}
    message = UserMessage.create(
        user_id=turn.user,
        session_id=f"s-{turn.user}",
        text=turn.text,
        deadline_ms=1000,
        max_tokens=1000,
        wall_clock_ms=1000,
        turn_id=turn.turn_id,
    )
    missing = [a for a in PARALLEL_AGENTS if a not in results]
    times = []
    for _ in range(3):
        started = time.perf_counter()
        logic.synthesize(message, results, missing)
        times.append((time.perf_counter() - started) * 1000)
    return median(times)


def synth_ms(turn: Turn, llm_call_ms: float) -> float:
    if turn.synth_compute_ms is None:
        turn.synth_compute_ms = synth_compute_ms(turn)
    return turn.synth_compute_ms + turn.llm_calls("synth") * llm_call_ms


def critical_ms(turn: Turn, llm_call_ms: float) -> float:
    """The ideal turn: the slowest parallel agent's own time plus Synth's."""
    return max(turn.agent_ms(a) for a in PARALLEL_AGENTS) + synth_ms(turn, llm_call_ms)


def sequential_ms(turn: Turn, llm_call_ms: float) -> float:
    """The baseline: the agents called one after another, then Synth."""
    return sum(turn.agent_ms(a) for a in PARALLEL_AGENTS) + synth_ms(turn, llm_call_ms)


def llm_use(turns: list[Turn]) -> dict[str, Any]:
    """Which agents called the LLM, from the results' tier and usage fields."""
    out: dict[str, Any] = {}
    for name in (*PARALLEL_AGENTS, "synth"):
        tiers = Counter(t.tier(name) for t in turns if t.ok)
        calls = [t.llm_calls(name) for t in turns if t.ok]
        out[name] = {
            "tiers": dict(tiers),
            "turns_with_llm_calls": sum(1 for c in calls if c),
            "llm_calls_per_turn": sum(calls) / len(calls) if calls else 0.0,
        }
    return out


def summary(values: list[float]) -> dict[str, float]:
    """p50/p90/p99, linear between closest ranks; nan when there are none."""
    if len(values) < 2:
        only = values[0] if values else float("nan")
        return {"p50": only, "p90": only, "p99": only, "n": len(values)}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49], "p90": cuts[89], "p99": cuts[98], "n": len(values)}


def ok_turns(turns: list[Turn]) -> tuple[list[Turn], list[str]]:
    good = [t for t in turns if t.ok]
    errors = [f"{t.user}: {t.error}" for t in turns if not t.ok][:10]
    return good, errors


# ---------------------------------------------------------------------- sampling


def rss_mib(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, proc in procs.items():
        try:
            out[name] = proc.memory_info().rss / 2**20
        except psutil.Error:
            out[name] = float("nan")
    return out


def stack_total(rss: dict[str, float]) -> float:
    # The LLM simulator stands in for an external server: not part of the stack.
    return sum(v for k, v in rss.items() if k != "llm-sim")


# ---------------------------------------------------------------------- phases


async def sequential(users: Users, n: int, max_s: float) -> list[Turn]:
    """Turns one after another (rotating users): no queueing, only the path itself."""
    turns: list[Turn] = []
    started = time.perf_counter()
    for i in range(n):
        if time.perf_counter() - started > max_s:
            break
        turns.append(await users.turn(users.user(i)))
    return turns


async def phase_instant(
    plan: Plan, stack: BenchStack, users: Users, sim: SimProcess, out: dict[str, Any]
) -> None:
    procs = stack.processes()
    if sim.pid is not None:
        procs["llm-sim"] = psutil.Process(sim.pid)
    # Warm-up: first connections, imports on first use, tokenizer loads.
    await closed_loop(users, 2, max_turns=plan.warmup_turns, duration_s=120)
    # Idle: what the stack burns doing nothing (poll loops, heartbeats), once its
    # consumers have gone idle (see coachbus.bus.pacing).
    await asyncio.sleep(plan.idle_settle_s)
    cpu0 = cpu_seconds(procs)
    await asyncio.sleep(plan.idle_s)
    cpu1 = cpu_seconds(procs)
    rss_idle = rss_mib(procs)
    idle_cpu = {k: (cpu1[k] - cpu0[k]) / plan.idle_s * 100 for k in procs}

    await sim.stats(reset=True)
    llm_call_ms = await sim.call_ms(SMALL_MODEL)
    turns = await sequential(users, plan.overhead_turns, plan.overhead_max_s)
    good, errors = ok_turns(turns)
    overhead = [t.turn_ms - critical_ms(t, llm_call_ms) for t in good]
    out["overhead"] = {
        "llm": {"ttft_ms": 0.0, "tokens_per_s": "infinite", "call_ms_measured": llm_call_ms},
        "turns": len(turns),
        "errors": errors,
        "overhead_ms": summary(overhead),
        "turn_ms": summary([t.turn_ms for t in good]),
        "critical_path_ms": summary([critical_ms(t, llm_call_ms) for t in good]),
        "client_extra_ms": summary([t.client_ms - t.turn_ms for t in good]),
        "synth_compute_ms": summary([t.synth_compute_ms or 0.0 for t in good]),
        "agent_ms": {a: summary([t.agent_ms(a) for t in good]) for a in PARALLEL_AGENTS},
        "llm_use": llm_use(good),
        "sim_stats": _sim_summary(await sim.stats()),
    }

    # Load: many turns from a fixed set of users, CPU and memory sampled around it.
    await sim.stats(reset=True)
    half = max(plan.load_turns // 2, 1)
    cpu_start = cpu_seconds(procs)
    first, elapsed1 = await closed_loop(
        users, plan.load_users, max_turns=half, duration_s=plan.load_max_s / 2
    )
    rss_half = rss_mib(procs)
    second, elapsed2 = await closed_loop(
        users, plan.load_users, max_turns=plan.load_turns - half, duration_s=plan.load_max_s / 2
    )
    cpu_end = cpu_seconds(procs)
    rss_end = rss_mib(procs)
    all_turns = first + second
    good, errors = ok_turns(all_turns)
    n = max(len(good), 1)
    out["load"] = {
        "users": plan.load_users,
        "turns": len(all_turns),
        "ok": len(good),
        "turns_at_half": len(first),
        "errors": errors,
        "elapsed_s": elapsed1 + elapsed2,
        "throughput_per_s": len(good) / max(elapsed1 + elapsed2, 1e-9),
        "turn_ms": summary([t.turn_ms for t in good]),
        "llm_use": llm_use(good),
        "sim_stats": _sim_summary(await sim.stats()),
    }
    out["cpu"] = {
        "idle_percent_of_a_core": idle_cpu,
        "ms_per_turn": {k: (cpu_end[k] - cpu_start[k]) * 1000 / n for k in procs},
    }
    out["memory"] = {
        "rss_mib": {"idle": rss_idle, "half": rss_half, "end": rss_end},
        "stack_total_mib": {
            "idle": stack_total(rss_idle),
            "half": stack_total(rss_half),
            "end": stack_total(rss_end),
        },
        "turns_at_half": len(first),
        "turns_at_end": len(all_turns),
    }


async def phase_fixed(plan: Plan, users: Users, sim: SimProcess, out: dict[str, Any]) -> None:
    await sim.start(ttft_ms=plan.fixed_llm_ms)
    await users.turn(users.user(0))  # the agents' clients reconnect to the new process
    await sim.stats(reset=True)
    llm_call_ms = await sim.call_ms(SMALL_MODEL)
    turns = await sequential(users, plan.fixed_turns, plan.fixed_max_s)
    good, errors = ok_turns(turns)
    coach_llm = [t for t in good if t.llm_calls("coach") > 0]
    coach_det = [t for t in good if t.llm_calls("coach") == 0]

    def coach_first_ms(t: Turn) -> float:
        assert t.first_coach_at is not None and t.message_at is not None
        return (t.first_coach_at - t.message_at) * 1000

    out["critical_path"] = {
        "llm": {"ttft_ms": plan.fixed_llm_ms, "tokens_per_s": "infinite"},
        "llm_call_ms_measured": llm_call_ms,
        "turns": len(turns),
        "errors": errors,
        "turn_ms": summary([t.turn_ms for t in good]),
        "critical_path_ms": summary([critical_ms(t, llm_call_ms) for t in good]),
        "sequential_ms": summary([sequential_ms(t, llm_call_ms) for t in good]),
        "efficiency": summary([t.turn_ms / critical_ms(t, llm_call_ms) for t in good]),
        "sequential_ratio": summary(
            [sequential_ms(t, llm_call_ms) / critical_ms(t, llm_call_ms) for t in good]
        ),
        "agent_ms": {a: summary([t.agent_ms(a) for t in good]) for a in PARALLEL_AGENTS},
        "llm_use": llm_use(good),
        "sim_stats": _sim_summary(await sim.stats()),
    }
    out["coach"] = {
        "ttft_ms": plan.fixed_llm_ms,
        "turns_coach_called_llm": len(coach_llm),
        "turns_coach_deterministic": len(coach_det),
        # With an LLM reply the first text can come no sooner than the first token.
        "beyond_ttft_ms": summary(
            [coach_first_ms(t) - plan.fixed_llm_ms for t in coach_llm if t.first_coach_at]
        ),
        "deterministic_first_reply_ms": summary(
            [coach_first_ms(t) for t in coach_det if t.first_coach_at]
        ),
    }
    typical = sorted(good, key=lambda t: t.turn_ms)[len(good) // 2] if good else None
    out["waterfall_turn"] = _waterfall(typical, llm_call_ms) if typical else None


def _waterfall(turn: Turn, llm_call_ms: float) -> dict[str, Any]:
    assert turn.message_at is not None and turn.final_at is not None
    bars = []
    for name in PARALLEL_AGENTS:
        data = turn.agents.get(name)
        if data is None:
            continue
        end = (ts(data["created_at"]) - turn.message_at) * 1000
        bars.append(
            {"name": name, "end_ms": end, "own_ms": float(data["latency_ms"]), "tier": data["tier"]}
        )
    bars.append(
        {
            "name": "synth (final)",
            "end_ms": turn.turn_ms,
            "own_ms": synth_ms(turn, llm_call_ms),
            "tier": turn.tier("synth"),
        }
    )
    coach_first = (
        (turn.first_coach_at - turn.message_at) * 1000 if turn.first_coach_at is not None else None
    )
    return {"turn_id": turn.turn_id, "bars": bars, "coach_first_ms": coach_first}


async def _steady_state(
    users: Users, n: int, ideal_turn_ms: float, plan: Plan, timeout: float
) -> tuple[list[Turn], float, dict[str, float]]:
    """``n`` users whose first messages are spread over one ideal turn (as users
    arrive, not in lock-step); throughput is the finals received in a window of
    ``level_s`` that opens once every user is past its first turn, per second."""
    ideal_s = ideal_turn_ms / 1000
    stagger = ideal_s / n
    start = (n - 1) * stagger + ideal_s
    began = time.perf_counter()
    turns, _elapsed = await closed_loop(
        users,
        n,
        max_turns=n * 1000,
        duration_s=start + plan.level_s,
        turn_timeout=timeout,
        stagger_s=stagger,
    )
    opens, closes = began + start, began + start + plan.level_s
    done = [t for t in turns if t.ok and opens <= t.done_at < closes]
    return turns, len(done) / plan.level_s, {"start_s": start, "length_s": plan.level_s}


def _level(
    n: int,
    turns: list[Turn],
    good: list[Turn],
    errors: Any,
    measured: float,
    ideal_turn_ms: float,
    window: dict[str, float],
    arrival: str,
) -> dict[str, Any]:
    ideal = n / (ideal_turn_ms / 1000) if ideal_turn_ms > 0 else float("nan")
    return {
        "users": n,
        "arrival": arrival,
        "turns": len(turns),
        "ok": len(good),
        "degraded": sum(1 for t in good if (t.final or {}).get("degraded")),
        "errors": errors,
        "window": window,
        "throughput_per_s": measured,
        "ideal_per_s": ideal,
        "fraction_of_ideal": measured / ideal if ideal else float("nan"),
        "turn_ms": summary([t.turn_ms for t in good]),
        "llm_use": llm_use(good),
    }


async def phase_throughput(plan: Plan, users: Users, sim: SimProcess) -> dict[str, Any]:
    llm_call_ms = await sim.call_ms(SMALL_MODEL, n=2)
    await sim.stats(reset=True)
    levels: list[dict[str, Any]] = []
    ideal_turn_ms = float("nan")
    timeout = plan.level_s + 20 * plan.slow_llm_ms / 1000 + 60
    for n in plan.levels:
        if n == plan.levels[0] or not ideal_turn_ms > 0:
            # One user (or the ideal unknown): no stagger; every turn counts and the
            # clock runs until the last started turn is done.
            turns, elapsed = await closed_loop(
                users, n, max_turns=n * 1000, duration_s=plan.level_s, turn_timeout=timeout
            )
            good, errors = ok_turns(turns)
            if n == plan.levels[0]:
                # The ideal turn: this stack's critical path with nothing queued.
                ideal_turn_ms = median([critical_ms(t, llm_call_ms) for t in good])
            measured, window = len(good) / elapsed, {"start_s": 0.0, "length_s": elapsed}
        else:
            turns, measured, window = await _steady_state(users, n, ideal_turn_ms, plan, timeout)
            good, errors = ok_turns(turns)
        levels.append(_level(n, turns, good, errors, measured, ideal_turn_ms, window, "staggered"))
    burst: dict[str, Any] | None = None
    top = plan.levels[-1]
    if top > 1 and ideal_turn_ms > 0:
        # The same users all at once, every turn counted until the last is done: how
        # a synchronized burst is absorbed (beside the target, not instead of it).
        turns, elapsed = await closed_loop(
            users, top, max_turns=top * 1000, duration_s=plan.level_s, turn_timeout=timeout
        )
        good, errors = ok_turns(turns)
        window = {"start_s": 0.0, "length_s": elapsed}
        burst = _level(
            top, turns, good, errors, len(good) / elapsed, ideal_turn_ms, window, "burst"
        )
    return {
        "llm": {"ttft_ms": plan.slow_llm_ms, "tokens_per_s": "infinite"},
        "llm_call_ms_measured": llm_call_ms,
        "ideal_turn_ms": ideal_turn_ms,
        "levels": levels,
        "burst": burst,
        "sim_stats": _sim_summary(await sim.stats()),
    }


async def phase_profile(plan: Plan, sim: SimProcess, out: dict[str, Any]) -> None:
    await sim.start(ttft_ms=0)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "profile.json"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.profile",
            "--base-url",
            sim.base_url,
            "--turns",
            str(plan.profile_turns),
            "--out",
            str(target),
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        )
        try:
            await asyncio.wait_for(proc.wait(), 300)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        out["profile"] = json.loads(target.read_text(encoding="utf-8"))


def _sim_summary(stats: dict[str, Any]) -> dict[str, Any]:
    return {
        k: stats.get(k)
        for k in ("requests", "by_model", "by_status", "max_active", "prompt_tokens")
    }


# ---------------------------------------------------------------------- main


async def phase_latency(plan: Plan, log_dir: Path, out: dict[str, Any]) -> None:
    sim = SimProcess(log_path=log_dir / "llm-sim-latency.log")
    overhead = _num(((out.get("overhead") or {}).get("overhead_ms") or {}).get("p50"))
    stack = BenchStack(
        sim=sim,
        replicas=1,
        users=plan.latency_users,
        log_dir=log_dir / "latency",
        deadline_ms=latency.DEADLINE_MS,
        extra_env=latency.PATIENT_ENV,
    )
    try:
        # The stack needs a model at its base URL from the start.
        await sim.start(profile="instant")
        out["latency"] = await latency.phase_latency(
            profiles=plan.latency_profiles,
            sim=sim,
            stack=stack,
            n_users=plan.latency_users,
            turns_one=plan.latency_turns_one,
            rounds=plan.latency_rounds,
            time_scale=plan.latency_scale,
            overhead_ms=overhead or 0.0,
            turn_timeout=plan.latency_turn_timeout_s,
        )
    finally:
        await sim.stop()


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value == value else None


async def run(plan: Plan, quick: bool, only: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": 1,
        "quick": quick,
        "machine": machine(),
        "plan": asdict(plan),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "errors": [],
    }
    started = time.perf_counter()
    log_dir = Path(tempfile.mkdtemp(prefix="coachbus-bench-"))
    if only == "latency":
        out["only"] = only
        await _guard("latency", phase_latency(plan, log_dir, out), out, None)
        return _finish(out, started)
    sim = SimProcess(log_path=log_dir / "llm-sim.log")
    n_users = max(max(plan.levels), plan.load_users)
    try:
        await sim.start(ttft_ms=0)
        stack = BenchStack(sim=sim, replicas=1, users=n_users, log_dir=log_dir / "r1")
        throughput: dict[str, Any] = {}
        async with running(stack) as (users, _tap):
            out["stack_start_s"] = {"instant": stack.started_s}
            for name, coro in (
                ("instant", phase_instant(plan, stack, users, sim, out)),
                ("fixed", phase_fixed(plan, users, sim, out)),
            ):
                await _guard(name, coro, out, stack)
            if not plan.fresh_throughput_stacks:
                await sim.start(ttft_ms=plan.slow_llm_ms)  # same port: the stack keeps it
                await _guard(
                    "throughput-1",
                    _store(throughput, "1", phase_throughput(plan, users, sim)),
                    out,
                    stack,
                )
        await _guard("profile", phase_profile(plan, sim, out), out, None)
        # Each replica count gets a stack of its own, started fresh. The embedded
        # broker's fetches that return records cost more CPU the longer the topic's
        # log (docs/reliability.md, "The memory-only embedded broker"), so a stack
        # that had already served the phases above would be measured slower than one
        # that had not, and the two replica counts would not be comparable.
        await sim.start(ttft_ms=plan.slow_llm_ms)
        for replicas in (1, 2) if plan.fresh_throughput_stacks else (2,):
            fresh = BenchStack(
                sim=sim, replicas=replicas, users=n_users, log_dir=log_dir / f"t{replicas}"
            )
            async with running(fresh) as (fresh_users, _fresh_tap):
                out["stack_start_s"][f"throughput-{replicas}"] = fresh.started_s
                await closed_loop(fresh_users, 2, max_turns=plan.warmup_turns, duration_s=60)
                await _guard(
                    f"throughput-{replicas}",
                    _store(throughput, str(replicas), phase_throughput(plan, fresh_users, sim)),
                    out,
                    fresh,
                )
        out["throughput"] = throughput
    finally:
        await sim.stop()
    await _guard(
        "prompts",
        _store(out, "prompts", asyncio.to_thread(prompts.measure, plan.prompt_turns)),
        out,
        None,
    )
    await _guard("latency", phase_latency(plan, log_dir, out), out, None)
    return _finish(out, started)


def _finish(out: dict[str, Any], started: float) -> dict[str, Any]:
    out["elapsed_s"] = time.perf_counter() - started
    out["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    out["machine"]["cpu_loop_s_at_end"] = cpu_loop_s()
    return out


async def _store(target: dict[str, Any], key: str, coro: Any) -> None:
    target[key] = await coro


async def _guard(name: str, coro: Any, out: dict[str, Any], stack: BenchStack | None) -> None:
    """A failed phase is recorded and the others still run; each phase is timed."""
    started = time.perf_counter()
    try:
        await coro
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(exc)).strip()
        logs = stack.failures()[-3000:] if stack is not None else ""
        out["errors"].append({"phase": name, "error": detail, "logs": logs})
        log.error("phase %s failed: %s\n%s", name, detail, traceback.format_exc())
    finally:
        out.setdefault("phase_s", {})[name] = time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny runs (smoke test)")
    parser.add_argument("--name", default=None, help="results file name (default: latest|quick)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--only", choices=["latency"], default=None, help="run one phase alone (G: latency)"
    )
    parser.add_argument(
        "--latency-scale",
        type=float,
        default=None,
        help="phase G's simulated clock (1.0 = real time, 0.5 = twice as fast)",
    )
    parser.add_argument(
        "--latency-profiles", default=None, help="phase G's profiles, comma-separated"
    )
    parser.add_argument("--latency-turns", type=int, default=None, help="phase G: turns of 1 user")
    parser.add_argument(
        "--latency-rounds", type=int, default=None, help="phase G: turns of each of the 16 users"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    plan = Plan.quick() if args.quick else Plan.full()
    changes: dict[str, Any] = {}
    if args.latency_scale is not None:
        changes["latency_scale"] = args.latency_scale
    if args.latency_profiles:
        changes["latency_profiles"] = tuple(args.latency_profiles.split(","))
    if args.latency_turns is not None:
        changes["latency_turns_one"] = args.latency_turns
    if args.latency_rounds is not None:
        changes["latency_rounds"] = args.latency_rounds
    plan = replace(plan, **changes)
    name = args.name or ("quick" if args.quick else "latest")
    if args.only:
        name = args.name or f"{name}-{args.only}"
    result = asyncio.run(run(plan, args.quick, args.only))
    args.out.mkdir(parents=True, exist_ok=True)
    result["table"] = report.rows(result)
    text = report.table(result)
    print(text)
    (args.out / f"{name}.json").write_text(
        json.dumps(result, indent=1, default=str, allow_nan=True), encoding="utf-8"
    )
    if args.only:
        print(f"\nwritten: {args.out / (name + '.json')}")
    else:
        report.plots(result, args.out)
        print(f"\nwritten: {args.out / (name + '.json')}, waterfall.png, throughput.png")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
