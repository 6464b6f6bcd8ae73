"""A circuit breaker per endpoint.

Closed: calls pass, consecutive failures are counted. Open (after ``threshold``
consecutive failures): calls are refused at once for ``reset_s``, so a dead GPU
node costs the turn nothing and the router moves to its next tier. Half-open:
after ``reset_s`` a single probe call is let through; its outcome closes or
re-opens the breaker.

The client reports every attempt, on both paths: ``chat`` and a stream alike count
a failure when the connection fails, the server answers 429/5xx, or the answer
breaks in the middle (an error event, a dropped connection) — also after the first
tokens reached the caller, which is how the Coach's live path fails. A 4xx counts
as a success (the server is up). A caller leaving a stream early, or a call cut at
the agent's deadline, counts as neither (``release_probe``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from coachbus.llm.api import CircuitOpenError

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    def __init__(
        self,
        name: str,
        *,
        threshold: int,
        reset_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.threshold = threshold
        self.reset_s = reset_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.reset_s:
            return "half_open"
        return "open"

    def before_call(self) -> None:
        """Raise :class:`CircuitOpenError` unless a call may go out now."""
        state = self.state
        if state == "open":
            raise CircuitOpenError(f"circuit of {self.name} is open")
        if state == "half_open":
            if self._probe_in_flight:
                raise CircuitOpenError(f"circuit of {self.name} is half-open, probe in flight")
            self._probe_in_flight = True

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probe_in_flight = False

    def record_failure(self) -> None:
        self._failures += 1
        if self._probe_in_flight or self._failures >= self.threshold:
            self._opened_at = self._clock()
        self._probe_in_flight = False

    def release_probe(self) -> None:
        """A call ended with neither verdict (e.g. cancelled): free the probe slot."""
        self._probe_in_flight = False
