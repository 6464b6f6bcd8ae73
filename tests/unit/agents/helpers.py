"""Small builders shared by the agent unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from coachbus.contracts.events import TurnBudget, UserMessage

_T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def msg(
    text: str,
    *,
    turn: str = "t1",
    session: str = "s1",
    user: str = "u1",
    hint: str | None = None,
) -> UserMessage:
    return UserMessage(
        turn_id=turn,
        session_id=session,
        user_id=user,
        created_at=_T0,
        text=text,
        language_hint=hint,  # type: ignore[arg-type]
        deadline_at=_T0 + timedelta(seconds=30),
        budget=TurnBudget(max_tokens=1000, deadline_at=_T0 + timedelta(seconds=30)),
    )
