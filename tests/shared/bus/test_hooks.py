"""The runtime's hook registry: a moment's callbacks run in the order they were added,
so the runtime's own (a partition's stores loaded) come before a service's."""

from __future__ import annotations

import pytest

from coachbus.bus.hooks import Hooks, RuntimeHooks

pytestmark = pytest.mark.unit


async def test_hooks_run_in_the_order_they_were_added() -> None:
    seen: list[tuple[str, set[int]]] = []
    hooks: Hooks[[set[int]]] = Hooks()

    async def first(partitions: set[int]) -> None:
        seen.append(("first", partitions))

    async def second(partitions: set[int]) -> None:
        seen.append(("second", partitions))

    hooks.append(first)
    hooks.append(second)
    await hooks.run({3})
    assert seen == [("first", {3}), ("second", {3})]
    assert len(hooks) == 2


async def test_each_runtime_has_its_own_hooks() -> None:
    one, two = RuntimeHooks(), RuntimeHooks()
    ran: list[str] = []

    async def started() -> None:
        ran.append("one")

    one.startup.append(started)
    await two.startup.run()
    assert ran == [] and len(two.startup) == 0
    await one.startup.run()
    assert ran == ["one"]
