"""The reviewers' API and console: ``/v1/review…`` (reviewer keys only) and ``/review``.

Every ``/v1/review`` route answers 401 without a key (the front door) and 403 to a
key without the reviewer role. A reviewer's claim, renewal, release, answer and
close each become an action on ``review-actions``; the request answers once its
action came back from the log with the verdict every replica agrees on (409 with
the reason when the log refused it: someone else's claim came first, the claim
lapsed, the item was closed). ``services/gateway/review_desk.py`` has the rest.

The console page (``/review``) is static, like the web chat: the reviewer pastes a
key into it and every figure it shows comes from this API. Whether it is served,
and on which port, is ``COACHBUS_REVIEW_CONSOLE`` (main.py).
"""

# No `from __future__ import annotations`: FastAPI must see the local Annotated aliases.

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from coachbus.contracts import ReviewAction, utcnow
from coachbus.contracts.review import ANSWER_MAX_CHARS, NOTE_MAX_CHARS
from services.gateway.auth import Principal, StreamSlots
from services.gateway.review_desk import NotConfirmed, ReviewDesk
from services.gateway.review_ledger import Verdict
from services.gateway.web import static_file

ItemId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
SSE_HEARTBEAT_S = 15.0
# What the console page is made of: served under /review/ so that a console on the
# internal port needs nothing from the public one.
CONSOLE_FILES = frozenset({"review.js", "review.css", "sse.js"})


class AnswerIn(BaseModel):
    """Free text, a template's id (rendered in the person's language and du/Sie),
    or both (the text as sent, the template recorded as its starting point)."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(default=None, min_length=1, max_length=ANSWER_MAX_CHARS)
    template: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _something(self) -> "AnswerIn":
        if self.text is None and self.template is None:
            raise ValueError("give a text, a template, or both")
        if self.text is not None and not self.text.strip():
            raise ValueError("the text is empty")
        return self


class LegacyAnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=ANSWER_MAX_CHARS)


class CloseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    outcome: str = Field(min_length=1, max_length=64)
    note: str = Field(default="", max_length=NOTE_MAX_CHARS)


def create_review_api_router(
    desk: ReviewDesk,
    reviewer: Callable[..., Awaitable[Principal]],
    streams: StreamSlots,
) -> APIRouter:
    router = APIRouter()
    Reviewer = Annotated[Principal, Depends(reviewer)]

    def _known(item_id: str) -> None:
        if not desk.known(item_id):
            raise HTTPException(404, "no open review for this item")

    async def _act(*actions: ReviewAction) -> list[Verdict]:
        try:
            return await desk.act(*actions)
        except NotConfirmed as exc:
            raise HTTPException(
                504, "the action was sent but not confirmed in time; reload the item"
            ) from exc

    def _refused(verdict: Verdict) -> HTTPException:
        return HTTPException(409, verdict.reason or "refused")

    def _claim_of(item_id: str) -> dict[str, Any] | None:
        request = desk.queue.get(item_id)
        if request is None:
            return None
        claim: dict[str, Any] | None = desk.summary(request, utcnow())["claim"]
        return claim

    @router.get("/v1/review")
    async def list_reviews(caller: Reviewer) -> dict[str, Any]:
        """Open items, most urgent first (severity, then the longest waiting), each
        with its age, who holds a claim on it and since when."""
        now = utcnow()
        items = desk.open_items()
        # Per user, how many older open items the per-user cap folded away.
        users = {r.user_id for r in items}
        collapsed = {u: n for u in users if (n := desk.queue.collapsed(u))}
        return {
            "items": [desk.summary(r, now) for r in items],
            "collapsed": collapsed,
            "you": caller.user_id,
            "server_time": now.isoformat(),
        }

    # Not in the OpenAPI document: a client generated from it (or a fuzzer) would wait
    # on a stream that never ends. README and docs/deploy.md describe it.
    @router.get("/v1/review/events", include_in_schema=False)
    async def review_events(caller: Reviewer) -> StreamingResponse:
        """The queue live, as server-sent events: ``snapshot`` (every open item, the
        server's time and who you are) first, then ``item`` (an item new or changed)
        and ``gone`` (closed, erased or dropped), and a keep-alive comment at least
        every 15 s. Ages are not re-sent: count them up from ``created_at``."""
        if not streams.acquire(caller.user_id):
            raise HTTPException(
                429, "too many event streams open for this key", headers={"Retry-After": "5"}
            )
        user_id = caller.user_id

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for piece in _events(user_id):
                    yield piece
            finally:
                streams.release(user_id)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # The open items' summaries and digests, built once per change of the queue (and
    # per second, for claims that lapse without a change) and shared by every live
    # queue: with 5,000 items each reviewer's stream rebuilt all of them on every
    # change, a cost that grew with the number of reviewers watching.
    shared: dict[str, Any] = {"key": None, "items": {}}

    def _current() -> dict[str, tuple[dict[str, Any], str]]:
        now = utcnow()
        key = (desk.version, int(now.timestamp()))
        if shared["key"] != key:
            built = {r.turn_id: desk.summary(r, now) for r in desk.open_items()}
            shared["items"] = {i: (summary, _digest(summary)) for i, summary in built.items()}
            shared["key"] = key
        items: dict[str, tuple[dict[str, Any], str]] = shared["items"]
        return items

    async def _events(user_id: str) -> AsyncIterator[bytes]:
        version = desk.version
        now = utcnow()
        current = _current()
        snapshot = {
            "items": [summary for summary, _ in current.values()],
            "you": user_id,
            "server_time": now.isoformat(),
        }
        yield _sse("snapshot", snapshot)
        sent = {item_id: digest for item_id, (_, digest) in current.items()}
        while True:
            async with desk.changed:
                if desk.version == version:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(desk.changed.wait(), SSE_HEARTBEAT_S)
                version = desk.version
            current = _current()
            pieces: list[bytes] = []
            for item_id, (summary, digest) in current.items():
                if sent.get(item_id) != digest:
                    sent[item_id] = digest
                    pieces.append(_sse("item", summary))
            for item_id in [i for i in sent if i not in current]:
                del sent[item_id]
                pieces.append(_sse("gone", {"item_id": item_id}))
            for piece in pieces:
                yield piece
            if not pieces:
                yield b": keep-alive\n\n"

    @router.get("/v1/review/{item_id}")
    async def review_item(item_id: ItemId, _caller: Reviewer) -> dict[str, Any]:
        """One item: the person's recent turns of that session (what this gateway
        holds), the replies coachbus sent for the turn and whether they carried help
        lines, the crisis screen's category, reason and confidence, the language,
        du/Sie and locale with its help lines, the answers sent, the item's audit
        history, and the outcomes and answer templates to choose from."""
        request = desk.queue.get(item_id)
        if request is None:
            raise HTTPException(404, "no open review for this item")
        return desk.detail(request, utcnow())

    @router.post("/v1/review/{item_id}/claim")
    async def claim(item_id: ItemId, caller: Reviewer) -> dict[str, Any]:
        """Claim the item: nobody else may answer or close it until the claim is
        released, lapses (``COACHBUS_REVIEW_CLAIM_TTL_S``) or the item is closed."""
        _known(item_id)
        (verdict,) = await _act(desk.claim_action(item_id, caller.user_id))
        if not verdict.accepted:
            raise _refused(verdict)
        return {"status": "claimed", "item_id": item_id, "claim": _claim_of(item_id)}

    @router.post("/v1/review/{item_id}/renew")
    async def renew(item_id: ItemId, caller: Reviewer) -> dict[str, Any]:
        """Extend your claim by another lapse period."""
        _known(item_id)
        (verdict,) = await _act(desk.renew_action(item_id, caller.user_id))
        if not verdict.accepted:
            raise _refused(verdict)
        return {"status": "renewed", "item_id": item_id, "claim": _claim_of(item_id)}

    @router.post("/v1/review/{item_id}/release")
    async def release(item_id: ItemId, caller: Reviewer) -> dict[str, Any]:
        """Give the item back to the queue."""
        _known(item_id)
        (verdict,) = await _act(desk.release_action(item_id, caller.user_id))
        if not verdict.accepted:
            raise _refused(verdict)
        return {"status": "released", "item_id": item_id}

    @router.post("/v1/review/{item_id}/answer", status_code=202)
    async def answer(item_id: ItemId, body: AnswerIn, caller: Reviewer) -> dict[str, Any]:
        """Answer the person (you must hold the claim). The person receives it as a
        reply of kind ``human`` once the log has accepted it, never before."""
        _known(item_id)
        if body.template is not None and body.template not in desk.content.templates:
            raise HTTPException(422, f"unknown template {body.template!r}")
        text = body.text
        if text is None:
            assert body.template is not None  # the model's validator
            text = desk.render_template(item_id, body.template)
        action = desk.answer_action(item_id, caller.user_id, text, body.template)
        (verdict,) = await _act(action)
        if not verdict.accepted:
            raise _refused(verdict)
        return {"status": "sent", "item_id": item_id, "answer_id": action.action_id}

    @router.post("/v1/review/{item_id}/close")
    async def close(item_id: ItemId, body: CloseIn, caller: Reviewer) -> dict[str, Any]:
        """Close the item with an outcome (``review.toml``) and a note for colleagues
        (you must hold the claim)."""
        _known(item_id)
        if body.outcome not in desk.content.outcomes:
            raise HTTPException(
                422, f"unknown outcome {body.outcome!r}; known: {sorted(desk.content.outcomes)}"
            )
        (verdict,) = await _act(desk.close_action(item_id, caller.user_id, body.outcome, body.note))
        if not verdict.accepted:
            raise _refused(verdict)
        return {"status": "closed", "item_id": item_id, "outcome": body.outcome}

    @router.post("/v1/review/{item_id}", status_code=202)
    async def answer_in_one_step(
        item_id: ItemId, body: LegacyAnswerIn, caller: Reviewer
    ) -> dict[str, Any]:
        """Claim, answer and close in one step (outcome: answered in the chat), as the
        API did before claims: refused (409) when someone else holds the item."""
        if desk.queue.get(item_id) is None:
            raise HTTPException(404, "no open review for this turn")
        answer = desk.answer_action(item_id, caller.user_id, body.text, None)
        verdicts = await _act(
            desk.claim_action(item_id, caller.user_id),
            answer,
            desk.close_action(item_id, caller.user_id, desk.content.answered_outcome, ""),
        )
        refused = next((v for v in verdicts if not v.accepted), None)
        if refused is not None:
            raise _refused(refused)
        return {"status": "sent", "turn_id": item_id, "answer_id": answer.action_id}

    return router


def create_review_page_router() -> APIRouter:
    """The console page: ``/review`` and its files, no key needed to load them."""
    router = APIRouter()

    @router.get("/review", include_in_schema=False)
    async def console() -> Response:
        return static_file("review.html")

    @router.get("/review/{name}", include_in_schema=False)
    async def console_file(name: str) -> Response:
        if name not in CONSOLE_FILES:
            return JSONResponse({"detail": "no such file"}, status_code=404)
        return static_file(name)

    return router


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _digest(summary: dict[str, Any]) -> str:
    # Everything but the age, which changes every second and which the page counts.
    return json.dumps({k: v for k, v in summary.items() if k != "age_s"}, sort_keys=True)
