"""What the gateway knows of recent turns, fed from the replies and agent topics.

Bounded (LRU) in turns and in bytes, so memory stays flat however many turns pass
through. A turn is kept as the JSON texts of its events (what the server-sent
events replay): an agent's result is that same text, not a second, parsed copy,
which took several times the memory of the JSON.

The final reply travels on another topic than the agents' results, so it can reach
the gateway before a result it was built from. Its event waits for those results
(a short grace at most), so a stream that ends with the final has shown them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from coachbus.contracts import (
    AGENTS,
    AgentResult,
    AgentResultAdapter,
    Reply,
    UserMessage,
    turn_started_at,
)
from coachbus.contracts.payloads import Language, Register


@dataclass(eq=False)
class TurnView:
    turn_id: str
    user_id: str
    session_id: str
    coach: Reply | None = None
    final: Reply | None = None
    human: list[Reply] = field(default_factory=list)
    # agent -> its result's JSON (the very string held in ``events``)
    agents: dict[str, str] = field(default_factory=dict)
    # (event name, JSON) in arrival order, for server-sent events.
    events: list[tuple[str, str]] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    size: int = 0  # characters of JSON held, for the store's byte budget
    # The final's JSON while it waits for results it was built from (see module doc).
    held_final: str | None = None
    grace_task: asyncio.Task[None] | None = None
    # The seq the next final_delta must carry to be shown: a piece out of order, or
    # a second stream of the same turn (a Synth that restarted mid-stream), is not.
    final_seq: int = 0
    # What the person wrote, as read back from user-messages: for a reviewer's view
    # of the session only (never an event of the turn's stream).
    said: str | None = None
    said_at: datetime | None = None
    language: Language | None = None
    address: Register | None = None

    def agent(self, name: str) -> AgentResult | None:
        data = self.agents.get(name)
        return AgentResultAdapter.validate_json(data) if data is not None else None

    async def wait_for(self, kind: str, timeout: float) -> Reply | None:
        """Wait until the turn has a reply of ``kind`` (coach or final), or time out."""
        async with self.changed:
            try:
                await asyncio.wait_for(
                    self.changed.wait_for(lambda: getattr(self, kind) is not None), timeout
                )
            except TimeoutError:
                return None
        reply: Reply | None = getattr(self, kind)
        return reply

    async def events_after(self, sent: int, timeout: float) -> list[tuple[str, str]]:
        """The events after the first ``sent``; waits up to ``timeout`` for one."""
        async with self.changed:
            if sent == len(self.events) and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), timeout)
            return self.events[sent:]

    def as_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "session_id": self.session_id,
            "coach": self.coach.model_dump(mode="json") if self.coach else None,
            "agents": {name: json.loads(data) for name, data in self.agents.items()},
            "final": self.final.model_dump(mode="json") if self.final else None,
            "human": [h.model_dump(mode="json") for h in self.human],
        }


# A turn sent through this gateway counts as in flight until its final arrives,
# or for this long at most (a final that never comes must not count forever).
IN_FLIGHT_LIMIT_S = 600.0
# How long a final waits for the results it names as reported. They were on the
# broker before it (Synth read them), so this only bounds a result that never
# decodes here; normally the wait is one fetch.
FINAL_GRACE_S = 3.0


class TurnStore:
    def __init__(self, capacity: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._turns: OrderedDict[str, TurnView] = OrderedDict()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0
        self._awaiting: dict[str, float] = {}  # turn id -> when it was sent (monotonic)
        # Called when a turn is sent (the feed shortens its fetch wait at once).
        self.on_sent: Callable[[], None] | None = None

    def open(self, turn_id: str, user_id: str, session_id: str, *, sent: bool = False) -> TurnView:
        """The turn's view, made if new; ``sent``: this gateway just published it."""
        view = self._turns.get(turn_id)
        if view is None:
            view = self._turns[turn_id] = TurnView(turn_id, user_id, session_id)
            self._evict()
        if sent and view.final is None:
            self._awaiting[turn_id] = time.monotonic()
            if self.on_sent is not None:
                self.on_sent()
        return view

    def _evict(self) -> None:
        # The oldest turns go first; the newest always stays, however large.
        while len(self._turns) > 1 and (
            len(self._turns) > self._capacity or self._bytes > self._max_bytes
        ):
            gone, view = self._turns.popitem(last=False)
            self._bytes -= view.size
            self._awaiting.pop(gone, None)

    @property
    def bytes_held(self) -> int:
        return self._bytes

    @property
    def in_flight(self) -> int:
        """Turns sent through this gateway still waiting for their final."""
        limit = time.monotonic() - IN_FLIGHT_LIMIT_S
        while self._awaiting:
            turn_id, sent_at = next(iter(self._awaiting.items()))
            if sent_at >= limit:
                break
            del self._awaiting[turn_id]
        return len(self._awaiting)

    def get(self, turn_id: str, user_id: str) -> TurnView | None:
        view = self._turns.get(turn_id)
        # Another user's turn is indistinguishable from one that does not exist.
        if view is None or view.user_id != user_id:
            return None
        return view

    async def add_reply(self, reply: Reply) -> None:
        view = self.open(reply.turn_id, reply.user_id, reply.session_id)
        if reply.kind == "coach_delta":
            # Streamed pieces go straight to live listeners; the view keeps only the
            # whole reply, which follows as kind "coach".
            if view.coach is None:
                await self._emit(view, "coach_delta", reply.model_dump_json())
            return
        if reply.kind == "final_delta":
            # The same for the synthesis: live listeners get its sentences in order
            # until the final is here (a delta behind the final adds nothing).
            if view.final is None and reply.seq == view.final_seq:
                view.final_seq += 1
                await self._emit(view, "final_delta", reply.model_dump_json())
            return
        if reply.kind == "coach":
            if view.coach is not None:
                return  # duplicate delivery
            view.coach = reply
        elif reply.kind == "final":
            if view.final is not None:
                return
            view.final = reply
            self._awaiting.pop(reply.turn_id, None)
            if self._unreported(view):
                view.held_final = reply.model_dump_json()
                view.grace_task = asyncio.create_task(
                    self._release_after(view, FINAL_GRACE_S), name="gateway-final-grace"
                )
                return
        else:
            if any(h.created_at == reply.created_at for h in view.human):
                return
            view.human.append(reply)
        await self._emit(view, reply.kind, reply.model_dump_json())

    def add_message(self, message: UserMessage) -> None:
        """What the person wrote in this turn (for reviewers), once."""
        view = self.open(message.turn_id, message.user_id, message.session_id)
        if view.said is not None or view.user_id != message.user_id:
            return
        view.said, view.said_at = message.text, message.created_at
        view.language, view.address = message.language, message.address
        view.size += len(message.text)
        if self._turns.get(view.turn_id) is view:
            self._bytes += len(message.text)
            self._evict()

    async def add_result(self, result: AgentResult) -> None:
        view = self.open(result.turn_id, result.user_id, result.session_id)
        if result.agent in view.agents:
            return
        data = result.model_dump_json()
        view.agents[result.agent] = data
        await self._emit(view, "agent", data)
        if view.held_final is not None and not self._unreported(view):
            if view.grace_task is not None:
                view.grace_task.cancel()
                view.grace_task = None
            await self._release_final(view)

    @staticmethod
    def _unreported(view: TurnView) -> list[str]:
        """Agents the final counts as reported whose result this view lacks."""
        if view.final is None:
            return []
        missing = set(view.final.missing_agents)
        return [a for a in AGENTS if a not in missing and a not in view.agents]

    async def _release_after(self, view: TurnView, delay: float) -> None:
        await asyncio.sleep(delay)
        view.grace_task = None
        await self._release_final(view)

    async def _release_final(self, view: TurnView) -> None:
        data, view.held_final = view.held_final, None
        if data is not None:
            await self._emit(view, "final", data)

    async def _emit(self, view: TurnView, event: str, data: str) -> None:
        async with view.changed:
            view.events.append((event, data))
            view.changed.notify_all()
        view.size += len(data)
        # Only a view still held counts (an evicted one may still get a late event).
        if self._turns.get(view.turn_id) is view:
            self._bytes += len(data)
            self._evict()

    def turns_of(self, user_id: str) -> list[TurnView]:
        """The user's turns still held, newest first."""
        return [v for v in reversed(self._turns.values()) if v.user_id == user_id]

    def drop_user(self, user_id: str, before: datetime | None = None) -> int:
        """Forget the user's turns (only those begun before ``before`` if given: a
        watermark that reaches this replica late must not take a newer turn)."""
        gone = [
            t
            for t, v in self._turns.items()
            if v.user_id == user_id and (before is None or _began_before(t, before))
        ]
        for turn_id in gone:
            view = self._turns.pop(turn_id)
            self._bytes -= view.size
            self._awaiting.pop(turn_id, None)
            if view.grace_task is not None:
                view.grace_task.cancel()
                view.grace_task = None
        return len(gone)

    def __len__(self) -> int:
        return len(self._turns)


def _began_before(turn_id: str, cutoff: datetime) -> bool:
    # A turn whose start cannot be told goes: keeping it could keep erased data.
    started = turn_started_at(turn_id)
    return started is None or started < cutoff
