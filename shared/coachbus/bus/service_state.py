"""The state one service keeps, and when it is loaded, dropped and erased.

* stores it alone writes (:class:`~coachbus.bus.state.OwnedStore`), held for the
  partitions this process owns: loaded when a partition is assigned, dropped when
  it is revoked;
* views of state other services write (:class:`~coachbus.bus.state.TableView`),
  all tailed by one consumer;
* every user's erase watermark (:class:`~coachbus.bus.erasure.Erasures`, itself a
  view), checked before any handler sees a record;
* the :class:`PartitionGate` that holds a partition's records until its state is
  loaded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, TypeVar

from pydantic import BaseModel

from coachbus.bus.dispatch import Record
from coachbus.bus.erasure import Erasures, origin
from coachbus.bus.hooks import RuntimeHooks
from coachbus.bus.publish import Publisher
from coachbus.bus.state import OwnedStore, TableView, ViewTail
from coachbus.contracts import EraseConfirmation, EraseRequest, EraseWatermark
from coachbus.settings import CoachbusSettings, KafkaSettings
from coachbus.topics import Topic

log = logging.getLogger(__name__)

S = TypeVar("S", bound=BaseModel)


class PartitionGate:
    """Holds a partition's records until its state has been loaded after assignment."""

    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}

    def _event(self, partition: int) -> asyncio.Event:
        event = self._events.get(partition)
        if event is None:
            event = self._events[partition] = asyncio.Event()
        return event

    def prepare(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._event(partition)

    def open(self, partitions: set[int]) -> None:
        for partition in partitions:
            self._event(partition).set()

    def close(self, partitions: set[int]) -> None:
        for partition in partitions:
            event = self._events.pop(partition, None)
            if event is not None and not event.is_set():
                event.set()  # release anyone waiting; the dispatcher drops revoked work

    async def wait(self, partition: int) -> bool:
        """Wait for the partition's state; False if it was revoked meanwhile."""
        event = self._event(partition)
        await event.wait()
        return self._events.get(partition) is event


class ServiceState:
    """The stores, views, erase watermarks and partition gate of one service."""

    def __init__(
        self,
        service: str,
        *,
        settings: CoachbusSettings,
        kafka: KafkaSettings,
        hooks: RuntimeHooks,
        publisher: Publisher,
    ) -> None:
        self.service = service
        self._settings = settings
        self._kafka = kafka
        self._hooks = hooks
        self._publisher = publisher
        # Off in tests without a broker (FastStream's TestKafkaBroker): nothing is
        # then loaded, tailed or waited for.
        self.kafka_io = True
        self.gate = PartitionGate()
        # Every user's erase watermark (topic ``erasures``): records of a turn that
        # began before it are dropped before any handler sees them.
        self.erasures = Erasures(topic=settings.topic(Topic.ERASURES.value), model=EraseWatermark)
        self.views: list[TableView[Any]] = [self.erasures]
        self.stores: list[OwnedStore[Any]] = []
        self._view_tail: ViewTail | None = None

    def owned_store(self, topic: Topic, model: type[S]) -> OwnedStore[S]:
        """State this service alone writes, kept for the partitions it owns."""
        store = OwnedStore(
            topic=self._settings.topic(topic.value),
            model=model,
            kafka=self._kafka,
            write=self._publisher.write_raw,
        )
        self.stores.append(store)

        async def load(partitions: set[int]) -> None:
            if self.kafka_io:
                started = time.monotonic()
                count = await store.load(partitions)
                log.info(
                    "%s: loaded %d records of %s for partitions %s in %.0f ms",
                    self.service,
                    count,
                    store.topic,
                    sorted(partitions),
                    (time.monotonic() - started) * 1000,
                )

        async def drop(partitions: set[int]) -> None:
            store.drop(partitions)

        self._hooks.partitions_assigned.append(load)
        self._hooks.partitions_revoked.append(drop)
        return store

    def table_view(self, topic: Topic, model: type[S]) -> TableView[S]:
        """A read-only copy of state another service writes."""
        view = TableView(topic=self._settings.topic(topic.value), model=model)
        self.views.append(view)
        return view

    async def erase_user(
        self, user_id: str, request: EraseRequest | None = None, record: Record | None = None
    ) -> None:
        """Forget a user: tombstones in every store this service owns, then hooks.

        With the request (seen in band on ``user-messages``) its watermark applies at
        once, before the ``erasures`` record reaches this process; and an owner of
        state confirms, after its tombstones, on ``erase-confirmations``.
        """
        if request is not None and record is not None:
            erased_at = origin(request.turn_id, request.created_at) or request.created_at
            self.erasures.note(
                EraseWatermark(
                    user_id=user_id,
                    request_id=request.turn_id,
                    erased_at=erased_at,
                    partition=record.partition,
                    offset=record.offset,
                    owners=[],
                )
            )
        for store in self.stores:
            await store.erase(user_id)
        for view in self.views:
            if view is not self.erasures:
                view.erase(user_id)
        await self._hooks.user_erased.run(user_id)
        if request is not None and self.stores:
            confirmation = EraseConfirmation(
                user_id=user_id, request_id=request.turn_id, owner=self.service
            )
            await self._publisher.publish(Topic.ERASE_CONFIRMATIONS, confirmation, key=user_id)

    async def start_views(self) -> None:
        """Tail every view through one consumer (see ViewTail)."""
        self._view_tail = ViewTail(self.views, self._kafka)
        await self._view_tail.start()

    async def stop_views(self) -> None:
        if self._view_tail is not None:
            await self._view_tail.stop()
