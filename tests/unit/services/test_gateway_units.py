"""Gateway pieces without a broker: keys, rate limits, the turn store."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from coachbus.contracts import Reply
from coachbus.settings import ApiKey
from services.gateway.auth import KeyRing, RateLimits
from services.gateway.turns import TurnStore

pytestmark = pytest.mark.unit


def test_keyring_resolves_bearer_tokens_only() -> None:
    ring = KeyRing(
        [
            ApiKey(user_id="a", key=SecretStr("k1")),
            ApiKey(user_id="r", key=SecretStr("k2"), reviewer=True),
        ]
    )
    assert ring.resolve("Bearer k1") is not None
    assert ring.resolve("bearer k2").reviewer is True  # type: ignore[union-attr]
    for bad in (None, "", "k1", "Basic k1", "Bearer ", "Bearer k3"):
        assert ring.resolve(bad) is None


def test_rate_limit_bucket_refills() -> None:
    limits = RateLimits(per_minute=3)
    assert [limits.take("u", now=0.0) for _ in range(3)] == [None, None, None]
    wait = limits.take("u", now=0.0)
    assert wait is not None and 19 < wait <= 20  # one token every 20 s
    assert limits.take("other", now=0.0) is None  # buckets are per user
    assert limits.take("u", now=21.0) is None


async def test_turn_store_dedupes_and_is_bounded() -> None:
    store = TurnStore(capacity=2)
    reply = Reply(turn_id="t1", session_id="s", user_id="u", kind="final", text="x")
    store.open("t1", "u", "s")
    await store.add_reply(reply)
    await store.add_reply(reply)
    view = store.get("t1", "u")
    assert view is not None and [e for e, _ in view.events] == ["final"]
    assert store.get("t1", "someone-else") is None
    store.open("t2", "u", "s")
    store.open("t3", "u", "s")
    assert store.get("t1", "u") is None  # the oldest turn was evicted
    assert len(store) == 2
