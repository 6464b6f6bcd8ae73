"""Entry point: `faststream run services.stability.main:app`."""

from services.stability.handlers import router, runtime

app = runtime.build_app(router)
