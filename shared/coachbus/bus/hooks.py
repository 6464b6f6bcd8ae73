"""The moments of a service's life its own code can join, in one typed registry.

The runtime runs them itself (``AgentRuntime.startup`` and ``shutdown``, the
rebalance listener, erasure, a session's end); a service adds what it must do at
that moment, e.g. Synth learns which turns were answered when partitions are
assigned. Hooks of one moment run one after another, in the order they were added:
the runtime's own come first (a partition's stores are loaded before a service's
hook reads them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, ParamSpec

from coachbus.contracts import SessionEnd

P = ParamSpec("P")


class Hooks(Generic[P]):
    """Callbacks of one moment, awaited in the order they were added."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[P, Awaitable[None]]] = []

    def append(self, callback: Callable[P, Awaitable[None]]) -> None:
        self._callbacks.append(callback)

    async def run(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for callback in self._callbacks:
            await callback(*args, **kwargs)

    def __len__(self) -> int:
        return len(self._callbacks)


@dataclass(frozen=True, eq=False)
class RuntimeHooks:
    # After the broker is reachable and the views are tailing, before the
    # consumers start.
    startup: Hooks[[]] = field(default_factory=Hooks)
    # After the work in hand is finished and committed.
    shutdown: Hooks[[]] = field(default_factory=Hooks)
    # Partition numbers this process now owns; their records wait until every
    # hook is done (load state here).
    partitions_assigned: Hooks[[set[int]]] = field(default_factory=Hooks)
    # Partition numbers this process no longer owns (drop their state here).
    partitions_revoked: Hooks[[set[int]]] = field(default_factory=Hooks)
    # A user id whose data is being erased, after the runtime's stores and views
    # forgot it.
    user_erased: Hooks[[str]] = field(default_factory=Hooks)
    # A user ended a session.
    session_ended: Hooks[[SessionEnd]] = field(default_factory=Hooks)
