"""Fixtures of the LLM layer's tests: isolated settings and an in-process simulator."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from coachbus.llm import LLMSettings
from coachbus.llm.sim import SimConfig
from tests.shared.llm.simserver import serve_in_background

SMALL = "Qwen/Qwen3-30B-A3B"
STRONG = "Qwen/Qwen3-235B-A22B"


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's COACHBUS_LLM_* must not leak into these tests."""
    for key in list(os.environ):
        if key.startswith("COACHBUS_LLM_"):
            monkeypatch.delenv(key)


def fast_settings(base_url: str | None = "http://llm.test/v1", **overrides: Any) -> LLMSettings:
    """Settings with short back-offs so retry tests take milliseconds."""
    values: dict[str, Any] = {
        "base_url": base_url,
        "retry_attempts": 3,
        "retry_wait_initial_s": 0.01,
        "retry_wait_max_s": 0.02,
        "retry_wait_jitter_s": 0.0,
        "breaker_failure_threshold": 5,
        "breaker_reset_s": 30.0,
    }
    values.update(overrides)
    return LLMSettings(**values)


SimFactory = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def sim() -> SimFactory:
    """``async with sim(ttft_ms=..., ...) as base_url``: a simulator on a free port."""

    def factory(**config: Any) -> AbstractAsyncContextManager[str]:
        defaults: dict[str, Any] = {"ttft_ms": 5.0, "tokens_per_s": 0.0, "seed": 7}
        defaults.update(config)
        return serve_in_background(SimConfig(**defaults))

    return factory


@pytest.fixture
async def sim_url(sim: SimFactory) -> AsyncIterator[str]:
    async with sim() as url:
        yield url
