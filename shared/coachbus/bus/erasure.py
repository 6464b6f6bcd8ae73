"""Erase watermarks: what every consumer checks so that erased means erased.

``DELETE /v1/me`` publishes an EraseRequest on ``user-messages`` (in order with the
user's messages) and records the user's *watermark* on the compacted ``erasures``
topic: when the erase was made and where the request sits. Every process tails
that topic (the explicit stored state of erasure) into an :class:`Erasures` table
and drops any record of a turn that began before the user's watermark: a result of
a turn that was in flight when the erase came, a redelivered message after a
crash, a reply or review read again by a restarted gateway.

A record's age is its turn's: turn ids are time-ordered (``new_turn_id``), so an
agent result or a reply made after the erase for a turn accepted before it is
still recognised as older. Records with other ids fall back to their own
``created_at``. Times, not offsets, are compared: a memory-only broker restarts
its offsets at zero, and derived records live on other topics than the request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from coachbus.bus.state import TableView
from coachbus.contracts import EraseWatermark, turn_started_at

log = logging.getLogger(__name__)


def origin(turn_id: object, created_at: object) -> datetime | None:
    """When the turn a record belongs to began: from its time-ordered turn id, else
    the record's own ``created_at`` (an ISO string or datetime); None if neither."""
    if isinstance(turn_id, str):
        started = turn_started_at(turn_id)
        if started is not None:
            return started
    if isinstance(created_at, datetime):
        return created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
    if isinstance(created_at, str):
        try:
            parsed = datetime.fromisoformat(created_at)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def raw_origin(value: bytes | None) -> datetime | None:
    """``origin`` of a raw JSON record; None if it does not parse (the consumer's own
    decoding dead-letters it as usual)."""
    if not value:
        return None
    try:
        head = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(head, dict):
        return None
    return origin(head.get("turn_id"), head.get("created_at"))


class Erasures(TableView[EraseWatermark]):
    """Every user's latest erase watermark, fed from the ``erasures`` topic and from
    EraseRequests seen in band. A later watermark wins; an earlier one arriving late
    (two gateway replicas erasing the same user at once) never lowers it."""

    def __init__(self, *, topic: str, model: type[EraseWatermark] = EraseWatermark) -> None:
        super().__init__(topic=topic, model=model)
        # Called with each watermark that raises a user's (e.g. the gateway drops
        # that user's cached turns on every replica).
        self.listeners: list[Callable[[EraseWatermark], None]] = []

    def apply(
        self,
        user_id: str,
        record: EraseWatermark | None,
        *,
        timestamp: int = 0,
        partition: int = -1,
    ) -> None:
        # Its own order (a later watermark wins), so it never goes back in time
        # whatever order a re-read brings, and never rebuilds aside.
        if record is None:
            # A tombstone: every event topic's retention has passed since the erase,
            # so no record it could filter is left.
            self._records.pop(user_id, None)
            return
        if record.user_id != user_id:
            log.warning("erasures: watermark keyed %r names another user; ignored", user_id)
            return
        current = self._records.get(user_id)
        if current is not None and record.erased_at < current.erased_at:
            return
        self._records[user_id] = record
        if current is None or current.request_id != record.request_id:
            for listener in self.listeners:
                listener(record)

    def apply_raw(
        self, key: bytes | None, value: bytes | None, *, timestamp: int = 0, partition: int = -1
    ) -> None:
        if key is None:
            return
        user_id = key.decode("utf-8", "replace")
        if not value:
            self.apply(user_id, None)
            return
        try:
            self.apply(user_id, EraseWatermark.model_validate_json(value))
        except ValidationError as exc:
            log.error("erasures: unreadable watermark skipped: %s", exc.errors()[:2])

    def note(self, watermark: EraseWatermark) -> None:
        self.apply(watermark.user_id, watermark)

    def erased_at(self, user_id: str) -> datetime | None:
        watermark = self._records.get(user_id)
        return watermark.erased_at if watermark is not None else None

    def predates(self, user_id: str, began: datetime | None) -> bool:
        """True if a record of ``user_id`` whose turn began at ``began`` is erased.
        A record of an erased user whose age cannot be told is dropped too: keeping
        it could bring back what the user asked to be forgotten."""
        erased_at = self.erased_at(user_id)
        if erased_at is None:
            return False
        return began is None or began < erased_at

    def drops(self, key: bytes | None, value: bytes | None) -> bool:
        """The central check on a raw record keyed by user id (every topic is)."""
        if key is None or not self._records:
            return False
        user_id = key.decode("utf-8", "replace")
        if user_id not in self._records:
            return False
        return self.predates(user_id, raw_origin(value))

    def older_than(self, cutoff: datetime) -> list[EraseWatermark]:
        """Watermarks made before ``cutoff`` (candidates for a tombstone)."""
        return [w for w in self._records.values() if w.erased_at < cutoff]

    def __len__(self) -> int:
        return len(self._records)
