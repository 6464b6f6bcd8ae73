"""Entry point: `faststream run services.gateway.main:app`.

The public port (``--port``) serves the HTTP API and /healthz; /metrics and the API
docs are served on ``COACHBUS_GATEWAY_INTERNAL_PORT`` of the same host instead.
"""

from services.gateway.auth import refuse_without_keys
from services.gateway.handlers import api, router, runtime
from services.gateway.internal import INTERNAL_PATHS, InternalServer, create_internal_app

# Outside local there is no generated dev key: a gateway with no keys would answer
# 401 to everyone and look healthy, so it does not start.
refuse_without_keys(runtime.settings)

app = runtime.build_app(router, http_app=api)
# Every service has /metrics on its one port; the gateway's one port is public.
app.routes = [(path, route) for path, route in app.routes if path not in INTERNAL_PATHS]
internal = InternalServer(
    # The review console too, when it is served on the internal port only.
    create_internal_app(api, api.state.review_app),
    runtime.settings.gateway_internal_port,
    required=runtime.settings.environment != "local",
)
app.on_startup(internal.start)
app.on_shutdown(internal.stop)
