"""Where a turn's CPU goes, by the code that spends it: our own or a library's.

``python -m bench.cpu --py-spy DIR`` leaves one collapsed-stack file per Python
process (py-spy's ``raw`` format: ``frame;frame;...;frame COUNT`` per line, each
frame ``function (module/path.py:line)``). This module charges every sample to the
innermost frame's package, weights each process by its measured CPU per turn, and
adds the processes that are not Python (the broker) as rows of their own.

Why the innermost frame: the question it answers is what it would take to make a
turn cheaper. A sample inside aiokafka's encoder is work our code asked for, but
only a change of library (or of how many requests we make) removes it; a sample in
our own function is ours to make faster.

A sample whose innermost frame is the event loop's ``run`` is time below Python:
uvloop, the C parts of asyncio (a task's step, a future's callbacks) and the system
calls they make. py-spy sees no Python frame there, so it cannot say more.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

OURS = "coachbus (our code; the regexes it runs included)"
LOOP = "event loop below Python (uvloop, asyncio's C parts, system calls)"
ASYNCIO = "asyncio (its Python part)"
STDLIB = "standard library, the rest"
OTHER = "other libraries"

# A module path's first component -> the group it is reported under.
GROUPS: dict[str, str] = {
    "coachbus": OURS,
    "services": OURS,
    "bench": OURS,
    "httpx": "httpx (httpcore, h11, anyio)",
    "httpcore": "httpx (httpcore, h11, anyio)",
    "h11": "httpx (httpcore, h11, anyio)",
    "anyio": "httpx (httpcore, h11, anyio)",
    "sniffio": "httpx (httpcore, h11, anyio)",
    "aiokafka": "aiokafka",
    "faststream": "FastStream (fast_depends)",
    "fast_depends": "FastStream (fast_depends)",
    "uvicorn": "uvicorn, Starlette, FastAPI",
    "starlette": "uvicorn, Starlette, FastAPI",
    "fastapi": "uvicorn, Starlette, FastAPI",
    "httptools": "uvicorn, Starlette, FastAPI",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic",
    "msgspec": "msgspec",
    "prometheus_client": "metrics and tracing",
    "opentelemetry": "metrics and tracing",
    "asyncio": ASYNCIO,
}


def frame_group(frame: str) -> str:
    """The group of one collapsed frame, ``function (path:line)``."""
    function, sep, where = frame.partition(" (")
    if not sep:
        return OTHER
    if function == "Runner.run" and where.startswith("asyncio/runners.py"):
        return LOOP
    path = where.rsplit(":", 1)[0]
    top = path.split("/", 1)[0]
    if top in GROUPS:
        return GROUPS[top]
    if path.startswith("<frozen") or "/" not in path:
        return STDLIB  # a top-level standard-library module (copy.py, typing.py, ...)
    if top in _STDLIB_PACKAGES:
        return STDLIB
    return OTHER


# Standard-library packages (directories) that show up in these stacks.
_STDLIB_PACKAGES = frozenset(
    {"json", "re", "logging", "email", "http", "urllib", "concurrent", "importlib", "collections"}
)


def shares(lines: Iterable[str]) -> Counter[str]:
    """Samples per group for one process's collapsed stacks."""
    out: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        out[frame_group(stack.rsplit(";", 1)[-1])] += int(count)
    return out


def attribute(
    stacks: Mapping[str, Iterable[str]], ms_per_turn: Mapping[str, float]
) -> dict[str, float]:
    """ms of CPU per turn per group, over every process of ``ms_per_turn``: a Python
    process's ms split by its samples, any other (no stacks) as a row of its own."""
    out: dict[str, float] = {}

    def add(group: str, ms: float) -> None:
        out[group] = out.get(group, 0.0) + ms

    for name, ms in ms_per_turn.items():
        if name not in stacks:
            add(f"{name} (not Python)", ms)
            continue
        counts = shares(stacks[name])
        total = sum(counts.values())
        if total == 0:
            add(f"{name} (no samples)", ms)
            continue
        for group, n in counts.items():
            add(group, ms * n / total)
    return out


def table(groups: Mapping[str, float]) -> str:
    total = sum(groups.values()) or 1.0
    lines = [f"{'where':<66}{'ms/turn':>8}{'share':>8}"]
    for group, ms in sorted(groups.items(), key=lambda kv: -kv[1]):
        lines.append(f"{group:<66}{ms:8.1f}{100 * ms / total:7.0f}%")
    lines.append(f"{'total':<66}{sum(groups.values()):8.1f}")
    return "\n".join(lines)


def read_dir(directory: Path, names: Iterable[str]) -> dict[str, list[str]]:
    """The collapsed stacks of each named process that has a file in ``directory``."""
    out: dict[str, list[str]] = {}
    for name in names:
        path = directory / f"{name}.txt"
        if path.exists():
            out[name] = path.read_text(encoding="utf-8").splitlines()
    return out


def report(directory: Path, ms_per_turn: Mapping[str, float]) -> str:
    """The table for one run: its processes' CPU per turn and their stacks."""
    return table(attribute(read_dir(directory, ms_per_turn), ms_per_turn))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.spy", description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path, help="py-spy's collapsed stacks (bench.cpu --py-spy)")
    parser.add_argument("result", type=Path, help="bench.cpu --json output of the same run")
    args = parser.parse_args()
    result = json.loads(args.result.read_text(encoding="utf-8"))
    print(report(args.dir, result["runs"][-1]["ms_per_turn"]))


if __name__ == "__main__":
    main()
