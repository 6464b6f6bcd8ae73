"""Entry point: `faststream run services.coach.main:app`."""

from services.coach.handlers import router, runtime

app = runtime.build_app(router)
