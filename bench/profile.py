"""The hot path under cProfile: every service's handler run in one process, in order
(five agents, then Synth's join and final), with the broker replaced by a list.

Run as ``python -m bench.profile --base-url URL --turns N --out FILE`` by the
benchmark, in a process of its own so the services read the benchmark's LLM
settings at import and the profiler sees nothing but the handlers. The LLM calls
go to the (instant) simulator, so the client, prompt and parsing code is profiled
too; the simulator's own work is in its process, not here.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import json
import os
import pstats
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import PARALLEL_AGENTS, POLICY_FILE, TEXTS
from coachbus.llm import LLMSettings

# Where a function's self time counts as (de)serialization: JSON and pydantic
# validation/dumping of the events, and the bus codec around them.
SERIALIZATION_MARKERS = (
    "pydantic",
    "json",
    "codec.py",
    "model_dump",
    "validate_python",
    "to_json",
)


@dataclass(slots=True)
class FakeRecord:
    """What the dispatcher hands a handler (aiokafka's ConsumerRecord fields)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any = ()


def _label(func: tuple[str, int, str]) -> str:
    path, line, name = func
    if path == "~":
        return name
    parts = Path(path).parts
    # Keep the path from the package root on: no machine-specific prefix.
    for anchor in ("site-packages", "shared", "work"):
        if anchor in parts:
            parts = parts[parts.index(anchor) + 1 :]
            break
    return f"{'/'.join(parts[-3:])}:{line}({name})"


async def run(turns: int, *, cprofile: bool = True) -> dict[str, Any]:
    from coachbus.bus.codec import encode
    from coachbus.contracts import UserMessage
    from coachbus.topics import AGENT_TOPICS, Topic

    modules = {
        name: importlib.import_module(f"services.{name}.handlers")
        for name in (*PARALLEL_AGENTS, "synth")
    }
    published: list[tuple[str, bytes]] = []

    async def capture(body: bytes, topic: str, **_kwargs: Any) -> None:
        published.append((topic, body))

    for module in modules.values():
        module.runtime.kafka_io = False
        module.runtime.broker.publish = capture
    handles = {name: modules[name].runtime.dispatchers[0]._handle for name in PARALLEL_AGENTS}
    synth = modules["synth"]
    synth_handle = synth.handle
    runtime = synth.runtime
    inbox = runtime.topic(Topic.USER_MESSAGES)
    replies = runtime.topic(Topic.REPLIES)
    out_topics = {runtime.topic(t): name for name, t in AGENT_TOPICS.items()}
    cpu_ms: dict[str, float] = {name: 0.0 for name in (*PARALLEL_AGENTS, "synth")}
    wall_ms: dict[str, float] = dict(cpu_ms)
    offset = 0
    profiler = cProfile.Profile()

    async def one(i: int, profile: bool) -> None:
        nonlocal offset
        msg = UserMessage.create(
            user_id=f"p{i % 8}",
            session_id=f"s{i % 8}",
            text=f"{TEXTS[i % len(TEXTS)]} (turn {i})",
            deadline_ms=30_000,
            max_tokens=24_000,
            wall_clock_ms=60_000,
        )
        key = msg.user_id.encode()
        offset += 1
        record = FakeRecord(inbox, 0, offset, key, encode(msg))
        if profile and cprofile:
            profiler.enable()
        for name in PARALLEL_AGENTS:
            published.clear()
            c0, w0 = time.process_time(), time.perf_counter()
            await handles[name](record)
            cpu_ms[name] += (time.process_time() - c0) * 1000 * profile
            wall_ms[name] += (time.perf_counter() - w0) * 1000 * profile
            results = [(t, b) for t, b in published if t in out_topics]
            agent_records = [FakeRecord(t, 0, offset, key, b) for t, b in results]
            if name == PARALLEL_AGENTS[0]:
                await synth_handle(record)
            c0, w0 = time.process_time(), time.perf_counter()
            for rec in agent_records:
                offset += 1
                await synth_handle(rec)
            cpu_ms["synth"] += (time.process_time() - c0) * 1000 * profile
            wall_ms["synth"] += (time.perf_counter() - w0) * 1000 * profile
        # Synth finalizes in a task of its own: wait (bounded) for the final reply.
        c0, w0 = time.process_time(), time.perf_counter()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(t == replies and msg.turn_id.encode() in b for t, b in published):
                break
            await asyncio.sleep(0.001)
        cpu_ms["synth"] += (time.process_time() - c0) * 1000 * profile
        wall_ms["synth"] += (time.perf_counter() - w0) * 1000 * profile
        if profile and cprofile:
            profiler.disable()

    # Warm-up turns: imports, tokenizer, first connections; not profiled.
    for i in range(3):
        await one(i, profile=False)
    for i in range(turns):
        await one(i + 3, profile=True)
    if not cprofile:
        # The handlers' CPU without the profiler's own overhead (about 2x under cProfile).
        return {
            "turns": turns,
            "llm": LLMSettings().enabled,
            "cpu_ms_per_turn": {k: v / turns for k, v in cpu_ms.items()},
            "wall_ms_per_turn": {k: v / turns for k, v in wall_ms.items()},
        }
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    # Waiting in epoll is idle time (the simulator answering), not work: left out.
    raw = {f: v for f, v in raw.items() if "epoll" not in _label(f)}
    total = sum(v[2] for v in raw.values()) or 1e-9
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)
    top = [
        {
            "function": _label(func),
            "calls": int(v[1]),
            "self_ms_per_turn": v[2] * 1000 / turns,
            "cumulative_ms_per_turn": v[3] * 1000 / turns,
            "self_share": v[2] / total,
        }
        for func, v in rows[:25]
    ]
    serial = sum(
        v[2]
        for func, v in raw.items()
        if any(m in _label(func).lower() for m in SERIALIZATION_MARKERS)
    )
    by_cumulative = sorted(raw.items(), key=lambda kv: kv[1][3], reverse=True)
    serial_cum = [
        {"function": _label(func), "cumulative_ms_per_turn": v[3] * 1000 / turns}
        for func, v in by_cumulative
        if any(m in _label(func).lower() for m in SERIALIZATION_MARKERS)
    ][:10]
    return {
        "turns": turns,
        "llm": LLMSettings().enabled,
        "cpu_ms_per_turn": {k: v / turns for k, v in cpu_ms.items()},
        "wall_ms_per_turn": {k: v / turns for k, v in wall_ms.items()},
        "profiled_self_ms_per_turn": total * 1000 / turns,
        "serialization_share": serial / total,
        "serialization_top": serial_cum,
        "top_self": top,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--no-cprofile", action="store_true", help="only the handlers' CPU, unprofiled"
    )
    args = parser.parse_args()
    # Read by the services' runtimes at import, so set before importing them.
    os.environ["COACHBUS_LOG_LEVEL"] = "WARNING"
    os.environ["OTEL_SDK_DISABLED"] = "true"
    os.environ["COACHBUS_LLM_POLICY_FILE"] = str(POLICY_FILE)
    if args.base_url:
        os.environ["COACHBUS_LLM_BASE_URL"] = args.base_url
    result = asyncio.run(run(args.turns, cprofile=not args.no_cprofile))
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
