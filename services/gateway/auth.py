"""API keys → user ids. The user id always comes from the key, never from a body."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from coachbus.settings import MIN_API_KEY_CHARS, ApiKey, CoachbusSettings


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    reviewer: bool


class KeyRing:
    def __init__(self, keys: list[ApiKey]) -> None:
        # Keys are looked up by digest so the table never holds them in the clear and
        # the lookup time does not depend on how much of a guessed key matched.
        self._by_digest = {
            self._digest(k.key.get_secret_value()): Principal(k.user_id, k.reviewer) for k in keys
        }

    @staticmethod
    def _digest(key: str) -> bytes:
        return hashlib.sha256(key.encode()).digest()

    def resolve(self, authorization: str | None) -> Principal | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = self._digest(token.strip())
        for known, principal in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return principal
        return None

    def __len__(self) -> int:
        return len(self._by_digest)


class RateLimits:
    """A token bucket per user: ``per_minute`` sustained, bursts of the same size.

    Rejects instead of queueing: a chat client should be told to slow down, not
    have its request parked inside the gateway. Bounded by the number of keys.
    """

    def __init__(self, per_minute: int) -> None:
        self._capacity = float(per_minute)
        self._rate = per_minute / 60.0
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, user_id: str, now: float | None = None) -> float | None:
        """Take one token; None if allowed, else the seconds until one is free."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(user_id, (self._capacity, now))
        tokens = min(self._capacity, tokens + (now - last) * self._rate)
        if tokens < 1.0:
            self._buckets[user_id] = (tokens, now)
            return (1.0 - tokens) / self._rate
        self._buckets[user_id] = (tokens - 1.0, now)
        return None


class StreamSlots:
    """Open event streams per user, capped.

    A stream holds a connection, a task and a turn view for up to the turn's
    give-up time; without a cap one key could open thousands and starve everyone
    else's. Bounded by the number of keys, like the rate limits.
    """

    def __init__(self, per_user: int) -> None:
        self._per_user = per_user
        self._open: dict[str, int] = {}

    def acquire(self, user_id: str) -> bool:
        n = self._open.get(user_id, 0)
        if n >= self._per_user:
            return False
        self._open[user_id] = n + 1
        return True

    def release(self, user_id: str) -> None:
        n = self._open.get(user_id, 0) - 1
        if n > 0:
            self._open[user_id] = n
        else:
            self._open.pop(user_id, None)

    def open(self, user_id: str) -> int:
        return self._open.get(user_id, 0)


def refuse_without_keys(settings: CoachbusSettings) -> None:
    """Stop the gateway outside ``local`` when no API key is configured.

    Locally the gateway generates a dev key instead (see handlers).
    """
    if not settings.api_keys and settings.environment != "local":
        raise SystemExit(
            f"COACHBUS_API_KEYS is empty; refusing to start the gateway in "
            f"{settings.environment} (set 'user_id:key' entries, keys of at least "
            f"{MIN_API_KEY_CHARS} characters)"
        )
