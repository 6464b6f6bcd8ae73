"""Entry point: `faststream run services.shadow.main:app`."""

from services.shadow.handlers import router, runtime

app = runtime.build_app(router)
