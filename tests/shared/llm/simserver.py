"""An ASGI app in the test's own event loop on a free port: the tests' one way to
serve the LLM simulator (``serve_in_background``) or a scripted model
(tests/integration/scripted_llm.py) without a process of their own. The simulator
itself is served by ``coachbus llm-sim``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

from coachbus.llm.sim import SimConfig, create_app


@contextlib.asynccontextmanager
async def serve_app(
    app: Any, host: str = "127.0.0.1", before_exit: Callable[[], None] | None = None
) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop on a free port; yields its ``/v1`` base URL.
    ``before_exit`` runs before the server waits for its open requests to end."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
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
        yield f"http://{host}:{port}/v1"
    finally:
        if before_exit is not None:
            before_exit()
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def serve_in_background(config: SimConfig | None = None) -> AsyncIterator[str]:
    """Run the simulator in this event loop on a free port; yields its ``/v1`` base URL."""
    config = config or SimConfig()
    app = create_app(config)
    # The simulator ends its queued and streaming requests first, so the server's
    # graceful wait for them is short.
    async with serve_app(app, config.host, before_exit=app.state.sim.shutdown) as url:
        yield url
