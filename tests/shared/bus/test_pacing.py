"""The fetch pacer: a short fetch wait while few users' turns are in hand, a longer
one once many are (polling less gives the CPU back to the work)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from coachbus.bus import dispatch, pacing
from coachbus.bus.dispatch import KeyedDispatcher, Record
from coachbus.bus.pacing import FetchPacer
from coachbus.settings import KafkaSettings
from tests.shared.bus.test_dispatch import FakeConsumer, Rec, _fail

pytestmark = pytest.mark.unit


class PacedConsumer(FakeConsumer):
    """aiokafka keeps the wait on its fetcher; so does this fake."""

    def __init__(self, wait_ms: int) -> None:
        super().__init__()
        self._fetcher = SimpleNamespace(_fetch_max_wait_ms=wait_ms)

    @property
    def wait_ms(self) -> int:
        value: int = self._fetcher._fetch_max_wait_ms
        return value


def _instant_dispatcher(pacer: FetchPacer) -> KeyedDispatcher:
    """A dispatcher whose handler answers at once."""

    async def instant(record: Record) -> None:
        return None

    return KeyedDispatcher(service="t", handle=instant, on_failure=_fail, pacer=pacer)


def test_wait_follows_the_number_of_users_in_hand() -> None:
    pacer = FetchPacer(base_ms=5, busy_ms=25, busy_at=4)
    assert [pacer.wait_for(n) for n in (0, 1, 3, 4)] == [5, 5, 5, 25]
    consumer = PacedConsumer(5)
    pacer.apply(consumer, 4)
    assert consumer.wait_ms == 25
    pacer.apply(consumer, 0)
    assert consumer.wait_ms == 5


def test_the_busy_wait_grows_with_the_load_up_to_a_bound() -> None:
    # Turns queue for the CPU: polling less often gives it back to them.
    pacer = FetchPacer(base_ms=5, busy_ms=25, busy_at=4)
    waits = [pacer.wait_for(n) for n in (4, 5, 6, 7, 8, 64)]
    assert waits == sorted(waits)
    assert waits[0] == 25
    assert waits[-1] == 25 * pacing.BUSY_SCALE_MAX


def test_a_busy_wait_not_above_the_base_changes_nothing() -> None:
    # On Kafka (which answers a waiting fetch at once) one sets a long wait: no pacing.
    pacer = KafkaSettings(
        fetch_max_wait_ms=500, fetch_max_wait_busy_ms=25, fetch_max_wait_idle_ms=250
    ).pacer()
    assert not pacer.enabled
    consumer = PacedConsumer(500)
    pacer.apply(consumer, 1000)
    assert consumer.wait_ms == 500


def test_a_client_without_the_attribute_is_left_alone() -> None:
    pacer = FetchPacer(base_ms=5, busy_ms=25, busy_at=1)
    pacer.apply(object(), 10)  # no error, nothing to set
    assert pacer.current_ms is None


async def test_dispatcher_paces_by_users_with_work_in_hand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dispatch, "ACTIVE_WINDOW_S", 0.0)  # work in hand only
    consumer = PacedConsumer(5)
    release = asyncio.Event()

    async def handle(record: Record) -> None:
        await release.wait()

    dispatcher = KeyedDispatcher(
        service="t",
        handle=handle,
        on_failure=_fail,
        pacer=FetchPacer(base_ms=5, busy_ms=25, busy_at=3),
    )
    # Three records of one user are one user's work: still the short wait.
    for offset in range(3):
        await dispatcher.submit(Rec("in", 0, offset, b"u1"), consumer)
    assert consumer.wait_ms == 5
    for offset, user in enumerate((b"u2", b"u3"), start=3):
        await dispatcher.submit(Rec("in", 0, offset, user), consumer)
    assert consumer.wait_ms == 25
    release.set()
    await dispatcher.idle()
    assert consumer.wait_ms == 5
    await dispatcher.close()


async def test_dispatcher_paces_by_users_seen_recently(monkeypatch: pytest.MonkeyPatch) -> None:
    # An agent that answers at once has nothing in hand, yet polls for every user.
    monkeypatch.setattr(dispatch, "ACTIVE_WINDOW_S", 0.2)
    consumer = PacedConsumer(5)
    dispatcher = _instant_dispatcher(FetchPacer(base_ms=5, busy_ms=25, busy_at=3))
    # One user sending turn after turn is not load.
    for offset in range(5):
        await dispatcher.submit(Rec("in", 0, offset, b"u1"), consumer)
        await dispatcher.idle()
    assert consumer.wait_ms == 5
    for offset, user in enumerate((b"u2", b"u3"), start=5):
        await dispatcher.submit(Rec("in", 0, offset, user), consumer)
        await dispatcher.idle()
    assert consumer.wait_ms == 25
    await asyncio.sleep(0.3)  # the window passes: the next record finds one user
    await dispatcher.submit(Rec("in", 0, 7, b"u1"), consumer)
    await dispatcher.idle()
    assert consumer.wait_ms == 5
    await dispatcher.close()


def test_a_quiet_replica_goes_idle_and_the_next_record_ends_it() -> None:
    pacer = FetchPacer(base_ms=5, busy_ms=25, busy_at=4, idle_ms=50, idle_after_s=5.0)
    assert pacer.wait_for(1, now=100.0) == 5
    assert pacer.wait_for(0, now=104.0) == 5  # quiet, not yet for long
    assert pacer.wait_for(0, now=105.5) == 50  # idle
    assert pacer.wait_for(1, now=106.0) == 5  # a record: awake at once
    assert pacer.wait_for(0, now=110.0) == 5
    assert pacer.wait_for(4, now=111.0) == 25  # busy wins over everything
    assert pacer.wait_for(0, now=116.5) == 50


def test_an_idle_wait_not_above_the_base_changes_nothing() -> None:
    # On Kafka a waiting fetch is answered at once: idle or not, nothing to save.
    pacer = KafkaSettings(fetch_max_wait_ms=500, fetch_max_wait_idle_ms=250).pacer()
    assert not pacer.enabled
    assert pacer.wait_for(0, now=1e9) == 500
    # The embedded default is paced both ways.
    embedded = KafkaSettings().pacer()
    assert embedded.enabled and embedded.idle_ms > embedded.base_ms


async def test_dispatcher_goes_idle_without_any_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "PACE_TICK_S", 0.01)
    monkeypatch.setattr(dispatch, "ACTIVE_WINDOW_S", 0.0)
    consumer = PacedConsumer(5)
    dispatcher = _instant_dispatcher(
        FetchPacer(base_ms=5, busy_ms=25, busy_at=3, idle_ms=50, idle_after_s=0.05)
    )
    # Before its first record the consumer is only known through the subscriber.
    made: list[PacedConsumer] = []
    dispatcher.watch(lambda: made[0] if made else None)
    dispatcher.start_pacing()
    await asyncio.sleep(0.03)
    made.append(consumer)
    for _ in range(100):
        await asyncio.sleep(0.01)
        if consumer.wait_ms == 50:
            break
    assert consumer.wait_ms == 50
    await dispatcher.submit(Rec("in", 0, 0, b"u1"), consumer)
    assert consumer.wait_ms == 5  # the record ended the idleness before any handling
    await dispatcher.idle()
    await dispatcher.close()
