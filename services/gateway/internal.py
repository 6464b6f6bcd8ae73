"""The gateway's internal port: /metrics and the API docs, never on the public port.

The public port takes traffic from the internet; what the process counts (metrics)
and the full map of its API (docs, schema) are for operators and scrapers, so they
live on a second small ASGI app served by the same process, on the same host, on
``COACHBUS_GATEWAY_INTERNAL_PORT``. Probes keep using /healthz on the public port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from prometheus_client import make_asgi_app
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from coachbus.metrics import REGISTRY

log = logging.getLogger(__name__)
INTERNAL_PATHS = ("/metrics", "/openapi.json", "/docs", "/redoc")


class _Asgi:
    """Starlette treats a plain function as a request handler; this keeps it ASGI."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def create_internal_app(api: FastAPI, extra: ASGIApp | None = None) -> Starlette:
    """Metrics, the OpenAPI schema of ``api`` and its two documentation pages; with
    ``extra``, every other path goes to it (the review console, when it is served
    here only: COACHBUS_REVIEW_CONSOLE=internal)."""

    async def schema(_request: Request) -> JSONResponse:
        return JSONResponse(api.openapi())

    async def docs(_request: Request) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{api.title} - docs")

    async def redoc(_request: Request) -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{api.title} - ReDoc")

    routes: list[BaseRoute] = [
        Route("/metrics", _Asgi(make_asgi_app(REGISTRY))),
        Route("/openapi.json", schema),
        Route("/docs", docs),
        Route("/redoc", redoc),
    ]
    if extra is not None:
        routes.append(Mount("/", app=extra))
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The public server owns the process's signals and stops this one from its
        # shutdown hook; two servers taking SIGTERM in turn would race.
        yield


class InternalServer:
    """Serves an ASGI app on a second port of the gateway process.

    ``required``: a port that cannot be bound stops the gateway (staging and
    production); otherwise it is logged and the gateway runs without it (a second
    local stack beside ``make run``).
    """

    def __init__(self, app: Any, port: int, *, required: bool) -> None:
        self.app = app
        self.port = port
        self.required = required
        self.bound_port: int | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: str = "127.0.0.1", **_options: Any) -> None:
        # ``host``: the public server's --host (FastStream hands its CLI options to
        # start-up hooks), so both ports listen on the same interfaces.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            # Bound here, not by uvicorn: uvicorn exits the process when it cannot bind.
            sock = socket.create_server((host, self.port), family=family, reuse_port=False)
        except OSError as exc:
            if self.required:
                raise RuntimeError(
                    f"gateway internal port {host}:{self.port} cannot be bound: {exc}"
                ) from exc
            log.warning("internal port %s:%s not served (%s)", host, self.port, exc)
            return
        self.bound_port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, lifespan="off", log_config=None, access_log=False, log_level="warning"
        )
        self._server = _Server(config)
        # The socket already listens: connections queue until the server takes them.
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="internal-http")
        log.info("metrics and API docs on internal port %s:%s", host, self.bound_port)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = None
        self._task = None
