"""The gateway's side of erasure: ``DELETE /v1/me`` and ``GET /v1/me/erase``.

An erase publishes an EraseRequest on ``user-messages`` (keyed by user: in order
with their messages, so each owner erases after every earlier message), then the
user's watermark on ``erasures`` (compacted): when, and where the request landed.
Every process reads that topic (``coachbus.bus.erasure``) and drops records of
turns begun before it. Each owner of the user's state confirms on
``erase-confirmations`` after its tombstones; every gateway replica tails both
topics, so any replica can tell whether an erase is complete.

A second erase while one is pending (not every owner has confirmed) changes
nothing: the caller gets the pending receipt again and nothing is published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from datetime import timedelta
from typing import Any

from opentelemetry.trace import SpanKind

from coachbus.bus.service import AgentRuntime
from coachbus.contracts import (
    ERASE_OWNERS,
    EraseConfirmation,
    EraseRequest,
    EraseWatermark,
    new_turn_id,
    turn_started_at,
    utcnow,
)
from coachbus.topics import Topic
from coachbus.tracing import turn_span
from services.gateway.review import ReviewQueue
from services.gateway.review_desk import ReviewDesk
from services.gateway.turns import TurnStore

log = logging.getLogger(__name__)

# Erase requests per user whose confirmations are kept (only the latest counts).
KEEP_REQUESTS = 4
SWEEP_EVERY_S = 3600.0


class EraseDesk:
    def __init__(
        self,
        runtime: AgentRuntime,
        store: TurnStore,
        reviews: ReviewQueue,
        *,
        owners: tuple[str, ...] = ERASE_OWNERS,
        review_desk: ReviewDesk | None = None,
    ) -> None:
        self._runtime = runtime
        self.erasures = runtime.erasures
        self._store = store
        self._reviews = reviews
        # The human tier: claims and answers go with the items, and the audit is told.
        self._review_desk = review_desk
        self._owners = list(owners)
        # user -> request id -> owners that confirmed (newest requests last)
        self._confirmed: dict[str, OrderedDict[str, set[str]]] = {}
        # An erase being published, so a concurrent second DELETE waits for it.
        self._inflight: dict[str, asyncio.Future[EraseWatermark]] = {}
        # Watermarks noted here whose record has not reached the topic yet.
        self._unpublished: dict[str, EraseWatermark] = {}
        self._sweeper: asyncio.Task[None] | None = None
        # The event topics' retention: past it no record a watermark filters is left.
        self._retention = timedelta(milliseconds=runtime.settings.retention_ms)
        # A watermark from any replica (or this one) drops the user's cached turns
        # and review items begun before it.
        self.erasures.listeners.append(self._forget_cached)

    def _forget_cached(self, watermark: EraseWatermark) -> None:
        self._store.drop_user(watermark.user_id, before=watermark.erased_at)
        if self._review_desk is not None:
            self._review_desk.drop_user(watermark.user_id, before=watermark.erased_at)
        else:
            self._reviews.drop_user(watermark.user_id, before=watermark.erased_at)

    # ------------------------------------------------------------------ confirmations

    def confirm(self, confirmation: EraseConfirmation) -> None:
        requests = self._confirmed.setdefault(confirmation.user_id, OrderedDict())
        requests.setdefault(confirmation.request_id, set()).add(confirmation.owner)
        while len(requests) > KEEP_REQUESTS:
            requests.popitem(last=False)

    def confirmed(self, watermark: EraseWatermark) -> set[str]:
        requests = self._confirmed.get(watermark.user_id)
        if requests is None:
            return set()
        return set(requests.get(watermark.request_id, set()))

    def complete(self, watermark: EraseWatermark) -> bool:
        return set(watermark.owners) <= self.confirmed(watermark)

    def pending(self, user_id: str) -> EraseWatermark | None:
        watermark = self.erasures.get(user_id)
        if watermark is None or self.complete(watermark):
            return None
        return watermark

    # ------------------------------------------------------------------ erase

    async def erase(self, user_id: str) -> tuple[EraseWatermark, bool]:
        """Erase the user, or return the pending erase; (watermark, collapsed)."""
        running = self._inflight.get(user_id)
        if running is not None:
            return await asyncio.shield(running), True
        pending = self.pending(user_id)
        if pending is not None and user_id not in self._unpublished:
            return pending, True
        future: asyncio.Future[EraseWatermark] = asyncio.get_running_loop().create_future()
        self._inflight[user_id] = future
        try:
            if pending is not None:
                # Noted here, but its record never reached the topic: send it now.
                watermark, collapsed = pending, True
            else:
                watermark, collapsed = await self._request(user_id), False
            await self._runtime.publish(Topic.ERASURES, watermark, key=user_id)
            self._unpublished.pop(user_id, None)
            future.set_result(watermark)
            return watermark, collapsed
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a waiter may not exist
            raise
        finally:
            del self._inflight[user_id]

    async def _request(self, user_id: str) -> EraseWatermark:
        turn_id = new_turn_id()
        # The watermark is the request's own turn time, so the request itself is
        # never older than its watermark (ids hold milliseconds).
        erased_at = turn_started_at(turn_id) or utcnow()
        request = EraseRequest(
            turn_id=turn_id, session_id="-", user_id=user_id, created_at=erased_at
        )
        with turn_span("gateway.erase", turn_id, "gateway", kind=SpanKind.PRODUCER):
            partition, offset = await self._runtime.publish_located(
                Topic.USER_MESSAGES, request, key=user_id
            )
        watermark = EraseWatermark(
            user_id=user_id,
            request_id=turn_id,
            erased_at=erased_at,
            partition=partition,
            offset=offset,
            owners=self._owners,
        )
        # Applied here at once (drops this replica's cache, filters its feed);
        # the other replicas learn it from the topic.
        self._unpublished[user_id] = watermark
        reviewed = (
            self._review_desk.items_of(user_id, erased_at) if self._review_desk is not None else []
        )
        self.erasures.note(watermark)
        if self._review_desk is not None and reviewed:
            # The audit keeps that these items existed and were erased, nothing more:
            # this replica took the erase, so it says so once.
            await self._review_desk.audit_erased(reviewed)
        return watermark

    def status(self, watermark: EraseWatermark) -> dict[str, Any]:
        confirmed = self.confirmed(watermark)
        return {
            "request_id": watermark.request_id,
            "erased_at": watermark.erased_at.isoformat(),
            "partition": watermark.partition,
            "offset": watermark.offset,
            "owners": watermark.owners,
            "confirmed": sorted(confirmed & set(watermark.owners)),
            "pending": sorted(set(watermark.owners) - confirmed),
            "complete": self.complete(watermark),
        }

    # ------------------------------------------------------------------ retention

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="gateway-erase-sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    async def sweep(self) -> int:
        """Tombstone watermarks older than the event topics' retention. Any replica
        may do it: a tombstone written twice is the same tombstone."""
        expired = self.erasures.older_than(utcnow() - self._retention)
        for watermark in expired:
            await self._runtime.tombstone(Topic.ERASURES, watermark.user_id)
            self.erasures.apply(watermark.user_id, None)
        return len(expired)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            try:
                await self.sweep()
            except Exception:
                log.exception("gateway: erase watermark sweep failed; next in an hour")
