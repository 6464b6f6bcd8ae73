"""The gateway's HTTP API (FastAPI): accept a message, show a turn, stream its events."""

# No `from __future__ import annotations`: FastAPI must see the local Annotated aliases.

import asyncio
import contextlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from coachbus.contracts import EraseRequest, Reply, UserMessage
from coachbus.contracts.payloads import Language
from coachbus.safety.helplines import Helplines
from coachbus.settings import CoachbusSettings
from services.gateway import review_content
from services.gateway.auth import KeyRing, Principal, RateLimits, StreamSlots
from services.gateway.erasure import EraseDesk
from services.gateway.ingress import Ingress, fits_the_bus
from services.gateway.openai_api import create_openai_router
from services.gateway.review import ReviewQueue
from services.gateway.review_api import create_review_api_router, create_review_page_router
from services.gateway.review_desk import LoopbackBus, ReviewDesk
from services.gateway.review_settings import ReviewSettings
from services.gateway.turns import TurnStore
from services.gateway.web import create_web_router

Publish = Callable[[UserMessage | EraseRequest], Awaitable[None]]
SessionId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
TurnId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
SSE_HEARTBEAT_S = 15.0
# After the final, how long a turn's stream waits to learn whether the turn went to a
# human (Stability's result and the review item can arrive just after the final).
HOLD_DECIDE_S = 3.0
# Sessions whose last language this gateway remembers (the oldest go first).
SESSION_LANGUAGES_KEPT = 10_000


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1)


class Accepted(BaseModel):
    turn_id: str
    session_id: str
    events: str


def problem(status: int, detail: str, **extra: Any) -> JSONResponse:
    """RFC 9457 problem details; the title is the status's reason phrase."""
    try:
        title = HTTPStatus(status).phrase
    except ValueError:  # a status code Python does not know
        title = "Error"
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def _install_errors(api: FastAPI) -> None:
    """Every error as RFC 9457 problem details."""

    # Starlette's own HTTPException (raised for undecodable bodies, for instance) is
    # the base class: handling it covers FastAPI's subclass too.
    @api.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = problem(exc.status_code, str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        if exc.status_code == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @api.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()[:10]
        ]
        return problem(422, "the request is not valid", errors=errors)


def create_api(
    settings: CoachbusSettings,
    keys: KeyRing,
    store: TurnStore,
    publish: Publish,
    reviews: ReviewQueue | ReviewDesk,
    publish_reply: Callable[[Reply], Awaitable[None]],
    desk: EraseDesk | None = None,
    *,
    review: ReviewSettings | None = None,
) -> FastAPI:
    """The public API. ``reviews``: the gateway's human tier; a bare queue gets one
    whose log is in memory (a gateway without a broker), answering through
    ``publish_reply``."""
    review = review or ReviewSettings()
    # Read and checked now: a broken help-lines file or an unknown locale stops the
    # gateway at start, before the page can show a wrong number.
    helplines = Helplines.configured(settings.helplines_file, settings.locale)
    if isinstance(reviews, ReviewDesk):
        review_desk = reviews
    else:
        loopback = LoopbackBus(publish_reply)
        review_desk = ReviewDesk(
            reviews,
            store,
            loopback.bus,
            settings=review,
            content=review_content.shipped(),
            helplines=helplines,
        )
        loopback.desk = review_desk
    api = FastAPI(
        title="coachbus gateway",
        version="1",
        description="Send a message to the coaching pipeline and follow its turn.",
        # The docs and the schema are served on the internal port (see main), not here.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    limits = RateLimits(settings.rate_limit_per_minute)
    streams = StreamSlots(settings.max_streams_per_user)
    # The newest event stream each person opened (see turn_events' hold); bounded by
    # the keys, like the rate limits.
    holds: dict[str, int] = {}
    # The language each session's last message was decided in: what this gateway
    # knows of the conversation, so a short "Okay." keeps it (UserMessage.create).
    session_languages: OrderedDict[tuple[str, str], Language] = OrderedDict()
    # Added before CORS so CORS wraps it: a browser can read the 401 and the 413.
    api.add_middleware(Ingress, keys=keys, limit=settings.max_message_bytes)
    if settings.cors_origins:
        api.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "X-Session-Id"],
            expose_headers=["X-Coachbus-Turn-Id", "Retry-After"],
        )

    _install_errors(api)

    # Async on purpose: FastAPI runs a sync dependency in a worker thread, a thread
    # hop per request for what is a dict lookup.
    async def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        found = keys.resolve(authorization)
        if found is None:
            raise HTTPException(401, "missing or unknown API key")
        return found

    async def limited(caller: Annotated[Principal, Depends(principal)]) -> Principal:
        retry_after = limits.take(caller.user_id)
        if retry_after is not None:
            raise HTTPException(
                429,
                f"rate limit of {settings.rate_limit_per_minute} messages per minute reached",
                headers={"Retry-After": str(max(1, round(retry_after)))},
            )
        return caller

    Caller = Annotated[Principal, Depends(principal)]

    @api.post("/v1/sessions/{session_id}/messages", status_code=202, response_model=Accepted)
    async def send_message(
        session_id: SessionId, body: MessageIn, caller: Annotated[Principal, Depends(limited)]
    ) -> Accepted:
        if len(body.text) > settings.max_message_chars:
            raise HTTPException(
                413, f"text of {len(body.text)} characters exceeds {settings.max_message_chars}"
            )
        session = (caller.user_id, session_id)
        message = UserMessage.create(
            user_id=caller.user_id,
            session_id=session_id,
            text=body.text,
            deadline_ms=settings.turn_deadline_ms,
            max_tokens=settings.turn_token_budget,
            wall_clock_ms=settings.turn_wall_clock_ms,
            earlier=session_languages.get(session),
        )
        session_languages[session] = message.language
        session_languages.move_to_end(session)
        while len(session_languages) > SESSION_LANGUAGES_KEPT:
            session_languages.popitem(last=False)
        if not fits_the_bus(message, settings.max_message_bytes):
            # Escapes can make the record longer than the body: the agents would
            # dead-letter it, so the caller hears it now instead.
            raise HTTPException(
                413, f"the message encodes to over {settings.max_message_bytes} bytes"
            )
        # Open the view before publishing so no reply can arrive before it exists.
        store.open(message.turn_id, caller.user_id, session_id, sent=True)
        await publish(message)
        return Accepted(
            turn_id=message.turn_id,
            session_id=session_id,
            events=f"/v1/turns/{message.turn_id}/events",
        )

    @api.get("/v1/turns/{turn_id}")
    async def get_turn(turn_id: TurnId, caller: Caller) -> dict[str, Any]:
        view = store.get(turn_id, caller.user_id)
        if view is None:
            raise HTTPException(404, "no such turn")
        return view.as_json()

    @api.get("/v1/turns/{turn_id}/events")
    async def turn_events(turn_id: TurnId, caller: Caller) -> StreamingResponse:
        """The turn's events as server-sent events, from its first; closes after ``final``,
        except on a turn that went to a human: then it stays open for the reviewer's
        ``human`` answer and closes after it (or when the item is closed, a newer
        stream of the same person opens, or COACHBUS_REVIEW_STREAM_HOLD_S passes).

        ``coach`` (the Coach's reply at once; ``coach_delta`` pieces of it before,
        when a model writes it), ``agent`` (one per agent's result), ``final_delta``
        (the synthesis sentence by sentence while Synth's model writes it: ``seq``
        from 0, each piece only its own text, the pieces joined are what was shown),
        ``final`` (the whole synthesis, which starts with the pieces: a client
        replaces what it assembled with it), ``human`` (a reviewer's answer), and
        ``timeout`` if no final came in time. See docs/streaming.md.
        """
        view = store.get(turn_id, caller.user_id)
        if view is None:
            raise HTTPException(404, "no such turn")
        # A newer stream of the same person ends the hold of an older one (below): one
        # held stream per person, however many turns went to a human.
        generation = holds.get(caller.user_id, 0) + 1
        holds[caller.user_id] = generation
        # Give up a little after Synth's own deadline: a final always comes by then
        # unless the pipeline is down, and the client should not hang forever.
        give_up_s = settings.turn_deadline_ms / 1000 * 3 + 30
        if not streams.acquire(caller.user_id):
            raise HTTPException(
                429,
                f"{settings.max_streams_per_user} event streams already open for this key",
                headers={"Retry-After": "5"},
            )
        user_id = caller.user_id

        slot = [True]  # the stream still counts against the person's open streams

        async def stream() -> AsyncIterator[bytes]:
            try:
                async for piece in _events():
                    yield piece
            finally:
                if slot[0]:
                    streams.release(user_id)

        async def _events() -> AsyncIterator[bytes]:
            sent = 0
            loop = asyncio.get_running_loop()
            end = loop.time() + give_up_s
            # After the final: None, or when to stop waiting for a reviewer's answer.
            final_at: float | None = None
            held = False
            answered = False
            while True:
                wait = min(SSE_HEARTBEAT_S, end - loop.time())
                if final_at is not None and not held:
                    wait = min(wait, 0.1)  # deciding whether to hold: look again soon
                async with view.changed:
                    if sent == len(view.events):
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(view.changed.wait(), max(0.0, wait))
                    pending = view.events[sent:]
                sent += len(pending)
                for event, data in pending:
                    yield f"event: {event}\ndata: {data}\n\n".encode()
                    if event == "human":
                        answered = True
                        if final_at is not None:
                            return  # the reviewer's answer is what the hold was for
                    if event == "final":
                        final_at = loop.time()
                if final_at is not None:
                    if answered or review.stream_hold_s <= 0:
                        return
                    if not held:
                        going = _to_a_human(turn_id)
                        if going is False or (
                            going is None and loop.time() - final_at >= HOLD_DECIDE_S
                        ):
                            return
                        if going:
                            # Held for the reviewer's answer: the person's chat shows it
                            # the moment it is sent. A held stream no longer counts
                            # against the person's open streams (there is one at most).
                            held = True
                            end = loop.time() + review.stream_hold_s
                            streams.release(user_id)
                            slot[0] = False
                    if held and (holds.get(user_id) != generation or _closed(turn_id)):
                        return
                    if held and loop.time() >= end:
                        return
                    if held and not pending:
                        yield b": keep-alive\n\n"
                    continue
                if loop.time() >= end:
                    yield b'event: timeout\ndata: {"detail": "no final reply in time"}\n\n'
                    return
                if not pending:
                    yield b": keep-alive\n\n"

        def _to_a_human(item_id: str) -> bool | None:
            """Whether the turn went to a human: its review item is known and open, or
            Stability's result says it escalated; None while neither has arrived (the
            final can overtake both)."""
            request, state = review_desk.item(item_id)
            if state is not None and state.closed is not None:
                return False
            if request is not None:
                return True
            stability = view.agents.get("stability")
            if stability is None:
                return None
            crisis = (json.loads(stability).get("payload") or {}).get("crisis") or {}
            return bool(crisis.get("escalated"))

        def _closed(item_id: str) -> bool:
            _, state = review_desk.item(item_id)
            return state is not None and state.closed is not None

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    api.include_router(create_openai_router(settings, keys, store, publish, limits, streams))
    api.include_router(create_web_router(store, keys, helplines))

    @api.delete("/v1/me", status_code=202)
    async def erase_me(caller: Annotated[Principal, Depends(limited)]) -> dict[str, Any]:
        """Forget everything coachbus holds about the caller (rate-limited like messages).

        Every owner of the caller's state receives the request in order with their
        messages, tombstones what it owns and confirms; every consumer drops records
        of turns begun before the erase. A second call while one is pending returns
        the same receipt and publishes nothing. ``GET /v1/me/erase`` follows it.
        """
        if desk is None:
            raise HTTPException(503, "erasure is not available on this gateway")
        watermark, collapsed = await desk.erase(caller.user_id)
        return {
            "status": "erasing",
            "collapsed": collapsed,
            "status_url": "/v1/me/erase",
            **desk.status(watermark),
        }

    @api.get("/v1/me/erase")
    async def erase_status(caller: Caller) -> dict[str, Any]:
        """The caller's latest erase: which owners confirmed, and whether all did."""
        watermark = desk.erasures.get(caller.user_id) if desk is not None else None
        if desk is None or watermark is None:
            raise HTTPException(404, "no erase known for this user")
        body = desk.status(watermark)
        return {"status": "erased" if body["complete"] else "erasing", **body}

    async def reviewer(caller: Caller) -> Principal:
        if not caller.reviewer:
            raise HTTPException(403, "this key has no reviewer role")
        return caller

    review_api = create_review_api_router(review_desk, reviewer, streams)
    if review.console == "internal":
        # The console and the reviewer API on the internal port only (main.py serves
        # this app there): the public port answers 404 for them.
        inner = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
        inner.add_middleware(Ingress, keys=keys, limit=settings.max_message_bytes)
        _install_errors(inner)
        inner.include_router(review_api)
        inner.include_router(create_review_page_router())
        api.state.review_app = inner
    else:
        api.include_router(review_api)
        if review.console == "public":
            api.include_router(create_review_page_router())
        api.state.review_app = None
    api.state.review_desk = review_desk

    return api
