"""Synth keeps each user's conversation memory (topic ``memory``; Synth is its only
writer): after a final reply, the exchange is folded in and finished sessions are
compressed (see coachbus.memory). Owned per partition like all user state."""

from __future__ import annotations

from collections.abc import Mapping

from coachbus.bus.service import AgentRuntime
from coachbus.bus.state import OwnedStore
from coachbus.contracts import AgentResult, PersonaResult, SessionEnd, ShadowResult, UserMessage
from coachbus.memory import MemoryRecord, end_session, remember
from coachbus.topics import Topic


class MemoryKeeper:
    def __init__(self, runtime: AgentRuntime) -> None:
        self.store: OwnedStore[MemoryRecord] = runtime.owned_store(Topic.MEMORY, MemoryRecord)

    async def after_final(
        self, message: UserMessage, results: Mapping[str, AgentResult], reply_text: str
    ) -> MemoryRecord:
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
        if before is None or updated.version != before.version:
            await self.store.put(message.user_id, updated)
        return updated

    async def end_session(self, event: SessionEnd) -> None:
        """An explicit end: compress now rather than at the next session's first turn."""
        record = self.store.get(event.user_id)
        if record is None or record.session_id != event.session_id:
            return
        end_session(record, event.created_at)
        record.mark_applied(event.turn_id)
        await self.store.put(event.user_id, record)
