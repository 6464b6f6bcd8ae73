"""The ASGI app a service is served as: its FastStream broker, ``/metrics``,
``/healthz`` and (the gateway's) HTTP API on one port."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from faststream.asgi import AsgiFastStream, make_ping_asgi
from faststream.kafka import KafkaBroker
from faststream.specification import AsyncAPI
from prometheus_client import make_asgi_app

from coachbus import __version__
from coachbus.metrics import REGISTRY
from coachbus.settings import CoachbusSettings

# The agents' default ports; the gateway's is a setting (COACHBUS_GATEWAY_PORT).
DEFAULT_PORTS = {
    "shadow": 8101,
    "persona": 8102,
    "plasticity": 8103,
    "stability": 8104,
    "coach": 8105,
    "synth": 8106,
}


class CoachbusApp(AsgiFastStream):
    """AsgiFastStream serving on the service's own default port unless told otherwise
    (``faststream run --port/--host`` win)."""

    def __init__(
        self,
        *args: Any,
        service: str,
        port: int,
        host: str,
        http_app: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.service = service
        self.default_port = port
        self.default_host = host
        self.http_app = http_app

    async def not_found(self, scope: Any, receive: Any, send: Any) -> None:
        if self.http_app is not None and scope["type"] == "http":
            await self.http_app(scope, receive, send)
            return
        await super().not_found(scope, receive, send)

    async def run(
        self, log_level: int = logging.INFO, run_extra_options: dict[str, Any] | None = None
    ) -> None:
        options = dict(run_extra_options or {})
        options.setdefault("port", self.default_port)
        options.setdefault("host", self.default_host)
        await super().run(log_level, options)


def make_app(
    service: str,
    broker: KafkaBroker,
    settings: CoachbusSettings,
    *,
    on_startup: Callable[[], Awaitable[None]],
    on_shutdown: Callable[[], Awaitable[None]],
    http_app: Any = None,
) -> CoachbusApp:
    """The service's app; ``http_app`` (an ASGI app) serves every other HTTP path."""
    return CoachbusApp(
        broker,
        service=service,
        http_app=http_app,
        port=settings.gateway_port if service == "gateway" else DEFAULT_PORTS[service],
        host=settings.host,
        asgi_routes=[
            ("/metrics", make_asgi_app(REGISTRY)),
            ("/healthz", make_ping_asgi(broker, timeout=5.0)),
        ],
        on_startup=[on_startup],
        on_shutdown=[on_shutdown],
        specification=AsyncAPI(
            title=f"coachbus {service}",
            version=__version__,
            description=f"The {service} service of the coachbus pipeline.",
        ),
    )
