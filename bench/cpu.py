"""CPU per turn per process, measured on its own: cheaper and steadier than the full
benchmark when the question is only where the CPU goes.

``python -m bench.cpu --turns N`` starts the stack as the benchmark does (its own
Tansu broker, the seven services as processes, the LLM simulator as a process with
an instant model, or no LLM at all with ``--no-llm``; ``--policy shipped`` puts the
product's policy in place of the bench's every-decision-to-the-model one), warms it
up, measures each
process's idle CPU once the consumers have gone idle, then sends ``N`` turns from
``--users`` closed-loop users through the gateway and prints psutil CPU time
(user + system) per turn for every process. ``--repeat R`` measures the load R
times on the same stack and prints each run and the median.

``--py-spy DIR`` (py-spy must be installed; it is not a project dependency) also
samples every process during the load and writes one collapsed-stack file per
process there, for flame graphs or ``sort | head`` reading, and prints the last
run's CPU per turn by the code that spent it (``bench.spy``). Sampling costs CPU in
the profiler, not in the processes it samples, but it does slow them a little:
measure without it.

Per-process CPU seconds are robust to other load on the machine (a process that
waits for a core spends no CPU meanwhile), not immune to it: caches and frequency
vary too, so compare repeated runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench import spy
from bench.harness import BenchStack, SimProcess, closed_loop, cpu_loop_s, cpu_seconds, running
from coachbus import llm as llm_package
from coachbus.settings import KafkaSettings


class _NoSim(SimProcess):
    """No LLM endpoint (an empty base URL counts as unset): rules only."""

    @property
    def base_url(self) -> str:
        return ""


def _spy(procs: dict[str, psutil.Process], target: Path, seconds: float) -> list[Any]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    target.mkdir(parents=True, exist_ok=True)
    running_spies = []
    for name, proc in procs.items():
        if name == "broker":
            continue  # not Python
        running_spies.append(
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "--pid",
                    str(proc.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "100",
                    "--nonblocking",
                    "--duration",
                    str(int(seconds) + 1),
                    "--output",
                    str(target / f"{name}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return running_spies


_POLICIES: dict[str, dict[str, str]] = {
    "bench": {},  # BenchStack's own: bench/policy.toml
    "shipped": {"COACHBUS_LLM_POLICY_FILE": str(Path(llm_package.__file__).parent / "policy.toml")},
}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    log_dir = Path(tempfile.mkdtemp(prefix="coachbus-cpu-"))
    sim = SimProcess(log_path=log_dir / "llm-sim.log")
    out: dict[str, Any] = {
        "turns": args.turns,
        "users": args.users,
        "policy": "none" if args.no_llm else args.policy,
        "runs": [],
    }
    out["cpu_loop_s_at_start"] = cpu_loop_s()
    out["load_avg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    try:
        if not args.no_llm:
            await sim.start(ttft_ms=0)
        stack = BenchStack(
            sim=_NoSim() if args.no_llm else sim,
            replicas=1,
            users=max(args.users, 2),
            log_dir=log_dir,
            extra_env=_POLICIES[args.policy],
        )
        async with running(stack) as (users, _tap):
            procs = stack.processes()
            if sim.pid is not None:
                procs["llm-sim"] = psutil.Process(sim.pid)
            await closed_loop(users, 2, max_turns=args.warmup, duration_s=120)
            if args.idle_s > 0:
                await asyncio.sleep(KafkaSettings().fetch_idle_after_s + 1)
                c0 = cpu_seconds(procs)
                await asyncio.sleep(args.idle_s)
                c1 = cpu_seconds(procs)
                out["idle_percent_of_a_core"] = {
                    k: (c1[k] - c0[k]) / args.idle_s * 100 for k in procs
                }
            for _ in range(args.repeat):
                spies: list[Any] = []
                if args.py_spy is not None:
                    spies = _spy(procs, args.py_spy, args.spy_s)
                    await asyncio.sleep(0.5)
                c0 = cpu_seconds(procs)
                started_at = time.time()
                started = time.perf_counter()
                turns, _elapsed = await closed_loop(
                    users, args.users, max_turns=args.turns, duration_s=args.max_s
                )
                elapsed = time.perf_counter() - started
                c1 = cpu_seconds(procs)
                ok = [t for t in turns if t.ok] or turns
                n = max(len(ok), 1)
                out["runs"].append(
                    {
                        "ok": len([t for t in turns if t.ok]),
                        "turns": len(turns),
                        "elapsed_s": elapsed,
                        "wall_clock": [started_at, time.time()],
                        "turn_ms_p50": statistics.median(t.turn_ms for t in ok if t.ok)
                        if any(t.ok for t in ok)
                        else None,
                        "ms_per_turn": {k: (c1[k] - c0[k]) * 1000 / n for k in procs},
                    }
                )
                for spy in spies:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        spy.wait(timeout=args.spy_s + 30)
    finally:
        await sim.stop()
        shutil.rmtree(log_dir, ignore_errors=True)
    out["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def table(result: dict[str, Any]) -> str:
    runs = result["runs"]
    names = sorted(runs[0]["ms_per_turn"], key=lambda k: (k == "broker", k == "llm-sim", k))
    idle = result.get("idle_percent_of_a_core", {})
    lines = [
        f"turns {result['turns']} x{len(runs)}, users {result['users']}, "
        f"load {result['load_avg_at_start']} -> {result['load_avg_at_end']}, "
        f"cpu loop {result['cpu_loop_s_at_start']} s",
        f"{'process':<12}"
        + "".join(f"{'run' + str(i + 1):>8}" for i in range(len(runs)))
        + f"{'median':>8}{'idle %':>8}",
    ]
    for name in [*names, "total"]:
        values = [
            sum(r["ms_per_turn"].values()) if name == "total" else r["ms_per_turn"][name]
            for r in runs
        ]
        idle_v = sum(idle.values()) if name == "total" else idle.get(name, float("nan"))
        lines.append(
            f"{name:<12}"
            + "".join(f"{v:8.1f}" for v in values)
            + f"{statistics.median(values):8.1f}{idle_v:8.1f}"
        )
    p50 = [r["turn_ms_p50"] for r in runs]
    lines.append(
        "turn p50 ms " + "".join(f"{v:8.0f}" if v is not None else "       -" for v in p50)
    )
    lines.append("ok turns    " + "".join(f"{r['ok']:8d}" for r in runs))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--users", type=int, default=16, help="closed-loop users (bench: 16)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--idle-s", type=float, default=5.0, help="0: skip the idle measure")
    parser.add_argument("--max-s", type=float, default=300.0)
    parser.add_argument("--no-llm", action="store_true", help="no LLM endpoint: rules only")
    parser.add_argument(
        "--policy",
        choices=("bench", "shipped"),
        default="bench",
        help="bench: every decision to the instant model; shipped: the product's policy "
        "(rules first, the model below each decision's confidence bar)",
    )
    parser.add_argument("--py-spy", type=Path, default=None, help="collapsed stacks here")
    parser.add_argument("--spy-s", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = asyncio.run(measure(args))
    print(table(result))
    if args.py_spy is not None:
        # The last run's samples, charged to the code that spent them (bench.spy).
        print()
        print(spy.report(args.py_spy, result["runs"][-1]["ms_per_turn"]))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
