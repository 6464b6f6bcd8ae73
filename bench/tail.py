"""``python -m bench.tail [--base REV]``: POST→final for one user on the rules tier,
measured from outside, side by side with another commit.

One person chatting: each message is sent when the last final arrived and a short
pause passed (a person reading). The latency is the gateway's POST to the ``final``
event on the turn's stream, as a client sees it. With ``--base`` the same run is
made on a checkout of that commit (a git worktree), the two alternating round by
round so both see the same hour of a noisy machine; the table prints p50/p95/p99 per
side and their ratios. Traffic only to 127.0.0.1; bounded in turns and seconds.

Each side runs in a process of its own whose imports come from its checkout: this
file is run by path (``--probe``), so it may import nothing of the ``bench`` package.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_TURNS = 2_000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered))))
    return ordered[rank - 1]


async def probe(turns: int, warmup: int, think_s: float) -> list[float]:
    """One stack of this process's checkout, one user: the latencies in ms."""
    import httpx

    from coachbus.embedded.stack import Stack, StackConfig

    key = "tail-bench-key-0123456789"
    log_dir = Path(tempfile.mkdtemp(prefix="coachbus-tail-"))
    # One person typing fast: the per-key rate limit is not what is measured.
    env = {
        "COACHBUS_API_KEYS": f"ana:{key}",
        "COACHBUS_LOG_LEVEL": "WARNING",
        "COACHBUS_RATE_LIMIT_PER_MINUTE": "100000",
    }
    stack = Stack(StackConfig.ephemeral(log_dir=log_dir, env=env))
    await stack.start()
    headers = {"Authorization": f"Bearer {key}"}
    texts = [
        "I want to run three times a week.",
        "I skipped my run again, too tired.",
        "Today I went for a run before work!",
        "Ich will jeden Abend zwanzig Seiten lesen.",
    ]
    out: list[float] = []
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            for n in range(warmup + turns):
                started = time.perf_counter()
                response = await client.post(
                    f"{stack.gateway_url}/v1/sessions/tail/messages",
                    json={"text": texts[n % len(texts)]},
                    headers=headers,
                )
                response.raise_for_status()
                turn = response.json()["turn_id"]
                async with client.stream(
                    "GET", f"{stack.gateway_url}/v1/turns/{turn}/events", headers=headers
                ) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("event: final"):
                            break
                if n >= warmup:
                    out.append((time.perf_counter() - started) * 1000)
                await asyncio.sleep(think_s)
    finally:
        await stack.stop()
    return out


def run_side(checkout: Path, turns: int, warmup: int, think_s: float) -> list[float]:
    env = {**os.environ, "PYTHONPATH": f"{checkout / 'shared'}{os.pathsep}{checkout}"}
    args = [sys.executable, str(Path(__file__).resolve()), "--probe", "--turns", str(turns)]
    args += ["--warmup", str(warmup), "--think-ms", str(think_s * 1000)]
    done = subprocess.run(args, env=env, cwd=checkout, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"probe on {checkout} failed:\n{done.stderr[-2000:]}")
    values: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tail", description=__doc__)
    parser.add_argument("--base", help="a commit to measure beside this checkout")
    parser.add_argument("--turns", type=int, default=150, help="measured turns per round")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per side")
    parser.add_argument("--think-ms", type=float, default=300.0)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    turns = max(1, min(args.turns, MAX_TURNS))
    if args.probe:
        values = asyncio.run(probe(turns, args.warmup, args.think_ms / 1000))
        print(json.dumps([round(v, 2) for v in values]))
        return 0
    sides: dict[str, Path] = {"this checkout": ROOT}
    worktree: Path | None = None
    if args.base:
        worktree = Path(tempfile.mkdtemp(prefix="coachbus-base-")) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.base],
            check=True,
            capture_output=True,
        )
        sides = {f"base {args.base}": worktree, "this checkout": ROOT}
    figures: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for _ in range(max(1, args.rounds)):
            for name, checkout in sides.items():
                figures[name] += run_side(checkout, turns, args.warmup, args.think_ms / 1000)
    finally:
        if worktree is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                capture_output=True,
            )
    table = {
        name: {
            "turns": len(v),
            "p50_ms": round(percentile(v, 0.50), 1),
            "p95_ms": round(percentile(v, 0.95), 1),
            "p99_ms": round(percentile(v, 0.99), 1),
            "max_ms": round(max(v), 1),
        }
        for name, v in figures.items()
    }
    print(f"POST -> final, one user, rules tier ({args.rounds} alternating rounds):")
    print(f"  {'':24}{'turns':>7}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}")
    for name, row in table.items():
        print(
            f"  {name:24}{row['turns']:>7}{row['p50_ms']:>7.1f}ms{row['p95_ms']:>7.1f}ms"
            f"{row['p99_ms']:>7.1f}ms{row['max_ms']:>7.1f}ms"
        )
    if len(table) == 2:
        base, ours = table.values()
        print(
            f"  this / base: p50 x{ours['p50_ms'] / base['p50_ms']:.2f}, "
            f"p99 x{ours['p99_ms'] / base['p99_ms']:.2f}"
        )
    if args.out:
        args.out.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    # Run by path: its folder (bench/, which has a module named like the standard
    # library's ``profile``) must not shadow anything the probe imports.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    raise SystemExit(main())
