"""Small builders shared by the agent unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from coachbus.contracts.events import TurnBudget, UserMessage, language_and_address

_T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


def msg(
    text: str,
    *,
    turn: str = "t1",
    session: str = "s1",
    user: str = "u1",
    hint: str | None = None,
    earlier: str | None = None,
) -> UserMessage:
    """A v2 message as the gateway builds it; ``earlier``: the conversation's
    language as the gateway knew it (a short "Okay." does not switch language)."""
    language, address = language_and_address(text, hint, earlier)  # type: ignore[arg-type]
    return UserMessage(
        turn_id=turn,
        session_id=session,
        user_id=user,
        created_at=_T0,
        text=text,
        language_hint=hint,  # type: ignore[arg-type]
        language=language,
        address=address,
        deadline_at=_T0 + timedelta(seconds=30),
        budget=TurnBudget(max_tokens=1000, deadline_at=_T0 + timedelta(seconds=30)),
    )
