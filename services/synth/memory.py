"""Synth keeps each user's conversation memory (topic ``memory``; Synth is its only
writer): after a final reply, the exchange is folded in and finished sessions are
compressed (see coachbus.memory). Owned per partition like all user state.

Erase: no memory is written for a turn that began before its user's erase
watermark, even one Synth was finalising when the erase arrived; and a write an
erase overtakes is tombstoned again (``OwnedStore.put``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from coachbus.bus.erasure import Erasures, origin
from coachbus.bus.service import AgentRuntime
from coachbus.bus.state import OwnedStore
from coachbus.contracts import AgentResult, PersonaResult, SessionEnd, ShadowResult, UserMessage
from coachbus.memory import MemoryRecord, end_session, remember
from coachbus.topics import Topic


class MemoryKeeper:
    def __init__(self, runtime: AgentRuntime) -> None:
        self.store: OwnedStore[MemoryRecord] = runtime.owned_store(Topic.MEMORY, MemoryRecord)
        self._erasures: Erasures = runtime.erasures

    def _erased(self, user_id: str, turn_id: str, created_at: datetime) -> bool:
        return self._erasures.predates(user_id, origin(turn_id, created_at))

    async def after_final(
        self, message: UserMessage, results: Mapping[str, AgentResult], reply_text: str
    ) -> MemoryRecord | None:
        """Fold the answered turn in; None (nothing written) if the user erased
        their data after the turn began."""
        if self._erased(message.user_id, message.turn_id, message.created_at):
            return None
        shadow = results.get("shadow")
        persona = results.get("persona")
        before = self.store.get(message.user_id)
        updated = remember(
            before,
            message,
            reply_text,
            shadow=shadow.payload if isinstance(shadow, ShadowResult) else None,
            persona=persona.payload if isinstance(persona, PersonaResult) else None,
        )
        changed = before is None or updated.version != before.version
        if changed and not await self.store.put(message.user_id, updated):
            return None  # an erase overtook the write
        return updated

    async def end_session(self, event: SessionEnd) -> None:
        """An explicit end: compress now rather than at the next session's first turn."""
        record = self.store.get(event.user_id)
        if record is None or record.session_id != event.session_id:
            return
        if self._erased(event.user_id, event.turn_id, event.created_at):
            return
        end_session(record, event.created_at)
        record.mark_applied(event.turn_id)
        await self.store.put(event.user_id, record)
