"""The memory trimmer: glibc's malloc_trim on a timer, a no-op where there is none."""

from __future__ import annotations

import asyncio
import sys

import pytest

from coachbus import memory_trim

pytestmark = pytest.mark.unit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_malloc_trim_is_callable_on_glibc() -> None:
    trim = memory_trim.malloc_trim()
    if trim is None:
        pytest.skip("not glibc")
    assert trim() in (0, 1)  # 1: memory was released, 0: nothing to release


async def test_trims_on_its_timer_and_never_when_off(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(memory_trim, "malloc_trim", lambda: lambda: calls.append(1) or 0)
    task = asyncio.create_task(memory_trim.trim_forever(0.01))
    await asyncio.sleep(0.1)
    task.cancel()
    assert len(calls) >= 3
    calls.clear()
    await memory_trim.trim_forever(0)  # returns at once: off
    assert calls == []


def test_no_libc_means_no_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_trim.sys, "platform", "darwin")
    assert memory_trim.malloc_trim() is None
