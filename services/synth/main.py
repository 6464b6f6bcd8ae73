"""Entry point: `faststream run services.synth.main:app`."""

from services.synth.handlers import router, runtime

app = runtime.build_app(router)
