"""API keys → user ids. The user id always comes from the key, never from a body."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from coachbus.settings import ApiKey


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
