"""The six agents in one process: the replay sandbox's light layout.

Production runs one process per service (replicas, isolation, their own metrics
port). A replay only needs the agents' decisions, in order, on their own topics:
one Python interpreter hosting all six keeps the sandbox's memory at one runtime's
libraries instead of six (measured in bench/replay.py). The services are loaded
by module name, so the shared library still imports no service; each keeps its own
AgentRuntime, broker connection and consumer group exactly as in its own process.

Run: ``python -m coachbus.embedded.one_process shadow persona plasticity stability coach
synth`` with the sandbox's environment (topic prefix, bootstrap, LLM); it prints
``ready`` once every agent consumes, and stops cleanly on SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
from typing import Any

from coachbus.roster import AGENT_SERVICES


async def serve(names: list[str]) -> None:
    runtimes: list[Any] = []
    for name in names:
        if name not in AGENT_SERVICES:
            known = ", ".join(AGENT_SERVICES)
            raise SystemExit(f"one_process: unknown agent {name!r}; known: {known}")
        handlers = importlib.import_module(f"services.{name}.handlers")
        handlers.runtime.include_router(handlers.router)
        runtimes.append(handlers.runtime)
    # As each app does: its startup (views, erase watermarks, hooks), then consumers.
    for runtime in runtimes:
        await runtime.startup()
    # All at once: each consumer's first group join waits out the broker's initial
    # rebalance delay (3 s on Tansu and Kafka's default), so one after another the
    # six agents took 18 s to start.
    await asyncio.gather(*(runtime.broker.start() for runtime in runtimes))
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for runtime in reversed(runtimes):
        await runtime.shutdown()
        await runtime.broker.stop()


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or list(AGENT_SERVICES)
    asyncio.run(serve(names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
