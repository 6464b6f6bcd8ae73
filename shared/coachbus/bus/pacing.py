"""How long a consumer's fetch may wait at the broker, chosen from the work in hand.

A fetch waits at most ``fetch_max_wait_ms`` for records. Kafka answers a waiting
fetch as soon as a record arrives, so there a long wait costs nothing. A broker
that re-reads its storage on a timer instead (the embedded Tansu broker does)
sees a record that arrives mid-wait only at its next read, part-way through the
wait: measured, a hop takes 4 ms p50 (12 ms at most) with a 15 ms wait, 12 ms
(24 ms) with 40 ms, and 127 ms (256 ms) with 500 ms. An empty fetch lasts the
whole wait, so the wait is also how often an idle consumer asks again, and each
round trip costs the client and the broker a fraction of a millisecond of CPU:
one consumer at 5 ms costs about 21% of a core, at 15 ms 11%. On a small machine
polling becomes the largest user of CPU, and it competes with the work it is
polling for.

So the wait follows the load. While a replica serves few users at once, every
millisecond of a hop shows in a turn, and the consumer asks often. Once it serves
``busy_at`` users or more (turns in hand, or users seen within the last second),
turns already queue for the LLM and for the CPU; a few milliseconds more per hop
are nothing next to that, and asking less often gives the CPU back to the work.
One user sending turn after turn is not load: the wait stays short for them.
Past ``busy_at`` the wait grows with the load (``busy_ms`` x load / ``busy_at``, at
most ``BUSY_SCALE_MAX`` x ``busy_ms``): with 16 users in hand on 2 cores a turn
takes seconds of queueing, yet every consumer still polled 40 times a second, and
that polling (each fetch lists every assigned partition, encoded and decoded in
pure Python by aiokafka and scanned by the broker) was most of the CPU a turn cost
outside the agents' own work. When records keep coming a fetch returns as soon as
one is there, so a long wait only costs when the stream is sparse.

A replica that has had nothing in hand for ``idle_after_s`` waits ``idle_ms``: the
embedded stack polled away more than a core of a 2-core machine doing nothing. The
price is paid once, by the first hop of the next turn (a few milliseconds on a
turn the LLM makes last seconds); the record it brings ends the idleness.

With ``busy_ms`` and ``idle_ms`` not above ``base_ms`` (e.g. on Kafka, with a long
wait) the pacer never changes anything.
"""

from __future__ import annotations

import time
from typing import Any

# How far the busy wait grows with the load (see the module docstring).
BUSY_SCALE_MAX = 2


class FetchPacer:
    def __init__(
        self,
        *,
        base_ms: int,
        busy_ms: int,
        busy_at: int,
        idle_ms: int | None = None,
        idle_after_s: float = 5.0,
    ) -> None:
        self.base_ms = base_ms
        self.busy_ms = max(busy_ms, base_ms)
        self.busy_at = max(busy_at, 1)
        self.idle_ms = max(idle_ms if idle_ms is not None else base_ms, base_ms)
        self.idle_after_s = idle_after_s
        self.current_ms: int | None = None
        # Starting counts as activity: a replica goes idle ``idle_after_s`` later.
        self._active_at = time.monotonic()

    @property
    def enabled(self) -> bool:
        return self.busy_ms > self.base_ms or self.idle_ms > self.base_ms

    def wait_for(self, load: int, now: float | None = None) -> int:
        """The fetch wait for ``load`` users' turns in hand; a load of 0 for
        ``idle_after_s`` means idle."""
        now = time.monotonic() if now is None else now
        if load > 0:
            self._active_at = now
        if load >= self.busy_at:
            if self.busy_ms <= self.base_ms:
                return self.busy_ms  # busy pacing off: nothing to scale
            scaled = self.busy_ms * load // self.busy_at
            return min(scaled, self.busy_ms * BUSY_SCALE_MAX)
        if now - self._active_at >= self.idle_after_s:
            return self.idle_ms
        return self.base_ms

    def apply(self, consumer: Any, load: int, now: float | None = None) -> None:
        """Set the consumer's fetch wait for ``load``; effective from its next fetch."""
        if not self.enabled:
            return
        wanted = self.wait_for(load, now)
        if wanted == self.current_ms:
            return
        # aiokafka reads the wait from its fetcher each time it builds a request and
        # has no public setter; a client without that attribute keeps its own wait.
        fetcher = getattr(consumer, "_fetcher", None)
        if fetcher is None or not hasattr(fetcher, "_fetch_max_wait_ms"):
            return
        fetcher._fetch_max_wait_ms = wanted
        self.current_ms = wanted
