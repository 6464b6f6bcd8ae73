"""The LLM simulator in the test's own event loop on a free port: the tests' helper
(the simulator itself is served by ``coachbus llm-sim``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

from coachbus.llm.sim import SimConfig, create_app


@contextlib.asynccontextmanager
async def serve_in_background(config: SimConfig | None = None) -> AsyncIterator[str]:
    """Run the simulator in this event loop on a free port; yields its ``/v1`` base URL."""
    import uvicorn

    config = config or SimConfig()
    app = create_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.005)
        yield f"http://{config.host}:{port}/v1"
    finally:
        app.state.sim.shutdown()
        server.should_exit = True
        await task
        sock.close()
