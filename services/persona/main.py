"""Entry point: `faststream run services.persona.main:app`."""

from services.persona.handlers import router, runtime

app = runtime.build_app(router)
