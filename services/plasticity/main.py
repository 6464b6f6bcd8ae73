"""Entry point: `faststream run services.plasticity.main:app`."""

from services.plasticity.handlers import router, runtime

app = runtime.build_app(router)
