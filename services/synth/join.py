"""The turn join: collects a turn's user message and agent results by turn id.

Durability comes from the input log itself: every record of an open turn is
*held* (its offset stays uncommitted) until the turn's final reply is published.
A Synth that crashes or loses the partition therefore gets every record of every
open turn again, and rebuilds the join from the topics alone. Finals already
published are recognised from the tail of the replies topic, so a replayed turn
is not answered twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from coachbus.bounded import BoundedSet
from coachbus.contracts import AgentResult, UserMessage

log = logging.getLogger(__name__)

Finalize = Callable[["OpenTurn", bool], Awaitable[None]]


@dataclass(eq=False)
class OpenTurn:
    turn_id: str
    partition: int
    opened_at: float
    message: UserMessage | None = None
    results: dict[str, AgentResult] = field(default_factory=dict)
    holds: list[asyncio.Future[None]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    finalizing: bool = False
    # The trace context of the user message, so the final reply joins the turn's trace.
    trace_context: object = None

    def missing(self, required: Iterable[str]) -> list[str]:
        return [a for a in required if a not in self.results]


class Join:
    def __init__(
        self,
        *,
        required: list[str],
        finalize: Finalize,
        replay_grace_s: float = 1.0,
        orphan_timeout_s: float = 60.0,
        remember: int = 50_000,
    ) -> None:
        self.required = required
        self._finalize = finalize
        self._replay_grace_s = replay_grace_s
        self._orphan_timeout_s = orphan_timeout_s
        self.open: dict[str, OpenTurn] = {}
        # Turns already answered (coachbus.bounded, the one bounded "answered" set):
        # late or replayed records of these are dropped.
        self.done: BoundedSet[str] = BoundedSet(remember)

    def is_done(self, turn_id: str) -> bool:
        return turn_id in self.done

    def mark_done(self, turn_id: str) -> None:
        self.done.add(turn_id)

    def _turn(self, turn_id: str, partition: int) -> OpenTurn:
        turn = self.open.get(turn_id)
        if turn is None:
            loop = asyncio.get_running_loop()
            turn = self.open[turn_id] = OpenTurn(turn_id, partition, loop.time())
            # A result without its message: give the message time to arrive, then give up.
            turn.timer = loop.call_later(self._orphan_timeout_s, self._expire, turn)
        return turn

    def add_message(
        self, message: UserMessage, partition: int, trace_context: object = None
    ) -> asyncio.Future[None] | None:
        if self.is_done(message.turn_id):
            return None
        turn = self._turn(message.turn_id, partition)
        if turn.message is not None:
            return None  # a duplicate delivery: the first copy is held already
        turn.message = message
        turn.trace_context = trace_context
        loop = asyncio.get_running_loop()
        remaining = (message.deadline_at - datetime.now(UTC)).total_seconds()
        # A deadline that passed while we were down: wait a moment for the replay of
        # the other topics before answering with what we have.
        delay = remaining if remaining > 0 else self._replay_grace_s
        if turn.timer is not None:
            turn.timer.cancel()
        turn.timer = loop.call_later(delay, self._deadline, turn)
        return self._hold(turn)

    def add_result(self, result: AgentResult, partition: int) -> asyncio.Future[None] | None:
        if self.is_done(result.turn_id):
            return None
        turn = self._turn(result.turn_id, partition)
        if result.agent in turn.results:
            return None  # duplicate (no idempotent producer on every broker)
        turn.results[result.agent] = result
        return self._hold(turn)

    def _hold(self, turn: OpenTurn) -> asyncio.Future[None]:
        hold: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turn.holds.append(hold)
        if turn.message is not None and not turn.missing(self.required):
            self._start_finalize(turn, degraded=False)
        return hold

    def _deadline(self, turn: OpenTurn) -> None:
        if self.open.get(turn.turn_id) is turn:
            self._start_finalize(turn, degraded=True)

    def _expire(self, turn: OpenTurn) -> None:
        if self.open.get(turn.turn_id) is turn and turn.message is None:
            # Results of a turn whose message never came (e.g. dead-lettered):
            # nothing to answer; release the offsets so the partition moves on.
            self._close(turn, commit=True)

    def _start_finalize(self, turn: OpenTurn, *, degraded: bool) -> None:
        if turn.finalizing:
            return
        turn.finalizing = True
        if turn.timer is not None:
            turn.timer.cancel()
        asyncio.get_running_loop().create_task(self._run_finalize(turn, degraded))

    async def _run_finalize(self, turn: OpenTurn, degraded: bool) -> None:
        try:
            await self._finalize(turn, degraded)
        except asyncio.CancelledError:
            self._close(turn, commit=False)
            raise
        except Exception:
            # Publishing failed: keep the offsets uncommitted and try again shortly;
            # a restart in the meantime replays the turn.
            log.exception("synth: finalizing a turn failed; retrying in 1 s")
            turn.finalizing = False
            loop = asyncio.get_running_loop()
            turn.timer = loop.call_later(1.0, self._deadline, turn)
            return
        self.mark_done(turn.turn_id)
        self._close(turn, commit=True)

    def _close(self, turn: OpenTurn, *, commit: bool) -> None:
        if turn.timer is not None:
            turn.timer.cancel()
        self.open.pop(turn.turn_id, None)
        for hold in turn.holds:
            if not hold.done():
                if commit:
                    hold.set_result(None)
                else:
                    hold.cancel()

    def forget_user(self, user_id: str) -> int:
        """Erasure: open turns of the user are dropped unanswered (and committed)."""
        gone = [
            t
            for t in self.open.values()
            if not t.finalizing
            and (
                (t.message is not None and t.message.user_id == user_id)
                or any(r.user_id == user_id for r in t.results.values())
            )
        ]
        for turn in gone:
            self.mark_done(turn.turn_id)
            self._close(turn, commit=True)
        return len(gone)

    def abandon(self, partitions: set[int]) -> int:
        """The partitions moved elsewhere: drop their open turns, commit nothing."""
        gone = [t for t in self.open.values() if t.partition in partitions and not t.finalizing]
        for turn in gone:
            self._close(turn, commit=False)
        return len(gone)
