"""Entry point: `faststream run services.gateway.main:app` (HTTP API on the same port)."""

from services.gateway.handlers import api, router, runtime

app = runtime.build_app(router, http_app=api)
