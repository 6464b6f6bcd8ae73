"""Tell someone outside that a high or critical item is waiting: an optional webhook.

The call carries the item's id, severity and age, never the person's words: the
receiver (a pager, a chat channel) is outside coachbus's care for personal data,
and whoever answers opens the console to read the item. Each body is signed with
the configured secret (HMAC-SHA256, ``X-Coachbus-Signature: sha256=<hex>``), so the
receiver can tell a call from coachbus from one from anyone else.

It never holds up the pipeline: items are queued (bounded; a full queue drops and
counts), one worker sends them, each with a timeout and retries that back off
(``backoff``, doubling); what fails every attempt is counted and logged, and the
next item is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
from dataclasses import dataclass

import httpx
from pydantic import SecretStr

from coachbus.metrics import REVIEW_WEBHOOK

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Coachbus-Signature"
QUEUE_SIZE = 1_000


@dataclass(frozen=True, slots=True)
class Notice:
    item_id: str
    severity: str
    age_s: float

    def body(self) -> bytes:
        data = {"item_id": self.item_id, "severity": self.severity, "age_s": round(self.age_s, 1)}
        return json.dumps(data, separators=(",", ":")).encode()


def signature(secret: SecretStr, body: bytes) -> str:
    digest = hmac.new(secret.get_secret_value().encode(), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class ReviewWebhook:
    def __init__(
        self,
        url: str,
        secret: SecretStr | None,
        *,
        attempts: int = 5,
        timeout_s: float = 5.0,
        backoff_s: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url
        self._secret = secret
        self._attempts = attempts
        self._backoff = backoff_s
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport)
        self._queue: asyncio.Queue[Notice] = asyncio.Queue(QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        # Notices sent or given up on: what a test (or shutdown) waits for.
        self.done = 0

    def submit(self, notice: Notice) -> None:
        """Queue a call; never waits."""
        try:
            self._queue.put_nowait(notice)
        except asyncio.QueueFull:
            REVIEW_WEBHOOK.labels("dropped").inc()
            log.error("review webhook: queue full, notice for %s dropped", notice.item_id)
            return
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="review-webhook")

    async def _run(self) -> None:
        while True:
            notice = await self._queue.get()
            try:
                await self.send(notice)
            finally:
                self.done += 1
                self._queue.task_done()

    async def send(self, notice: Notice) -> bool:
        """One notice, with retries; True when the receiver took it (2xx)."""
        body = notice.body()
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            headers[SIGNATURE_HEADER] = signature(self._secret, body)
        delay = self._backoff
        for attempt in range(1, self._attempts + 1):
            try:
                response = await self._client.post(self._url, content=body, headers=headers)
                if response.is_success:
                    REVIEW_WEBHOOK.labels("ok").inc()
                    return True
                problem = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if attempt == self._attempts:
                break
            REVIEW_WEBHOOK.labels("retried").inc()
            log.warning(
                "review webhook: attempt %d for %s failed (%s); retrying in %.1f s",
                attempt,
                notice.item_id,
                problem,
                delay,
            )
            await asyncio.sleep(delay)
            delay *= 2
        REVIEW_WEBHOOK.labels("failed").inc()
        log.error(
            "review webhook: gave up on %s after %d attempts (%s)",
            notice.item_id,
            self._attempts,
            problem,
        )
        return False

    async def drain(self) -> None:
        """Wait until every queued notice was sent or given up on."""
        await self._queue.join()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._client.aclose()
