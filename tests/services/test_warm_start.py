"""The services that screen load the screens before their first message."""

from __future__ import annotations

import importlib

import pytest

from coachbus.learned import shipped
from coachbus.safety.warm import warm, warm_in_thread

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("service", ["stability", "coach", "synth"])
def test_a_screening_service_warms_the_screens_at_startup(service: str) -> None:
    handlers = importlib.import_module(f"services.{service}.handlers")
    assert warm_in_thread in handlers.runtime.hooks.startup._callbacks


def test_warm_reads_every_learned_reader() -> None:
    shipped.cache_clear()
    warm()
    assert shipped.cache_info().currsize == 3
