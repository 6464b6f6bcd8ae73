"""The web chat at ``/``: a static page (no build step) and the "beliefs" view it shows.

The page is plain HTML, CSS and ES modules shipped in ``static/`` and served from
here, so the gateway needs nothing but Python to offer it. Everything it shows comes
from the public API; the endpoints added here are ``GET /v1/me/beliefs`` and the
public ``GET /v1/help-lines``.
"""

from __future__ import annotations

import re
from http import HTTPStatus
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Header
from fastapi.responses import FileResponse, JSONResponse, Response

from coachbus.contracts import AgentResult
from coachbus.safety.helplines import SHIPPED, Helplines
from coachbus.text import Language
from services.gateway.auth import KeyRing
from services.gateway.turns import TurnStore, TurnView

STATIC_DIR = Path(__file__).parent / "static"

# Only what the page is made of, by extension: anything else in the folder (editor
# backups, a stray .py) is not served, and the content type never comes from a guess.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
# One path segment of plain characters: no "..", no slashes, no dot files.
_STATIC_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")

# The page loads nothing from elsewhere and runs no inline script or style, so the
# strictest useful policy fits; it is what keeps a rendering slip from becoming XSS.
CSP = (
    "default-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files change with each deployment and are tiny: revalidate rather than
    # let a browser run yesterday's app.js against today's API.
    "Cache-Control": "no-cache",
}


# The brand mark as the tab icon. Kept here, not in static/, because the package data
# ships only the page's own file types; without an icon every visit logs a 404.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">'
    '<stop offset="0" stop-color="#3f51d9"/><stop offset="1" stop-color="#0f8f86"/>'
    "</linearGradient></defs>"
    '<rect width="32" height="32" rx="9" fill="url(#g)"/>'
    '<circle cx="10" cy="10" r="3.5" fill="#fff"/></svg>'
)


def _problem(status: int, detail: str) -> JSONResponse:
    # Built here rather than borrowed from api.py, which imports this module.
    title = HTTPStatus(status).phrase
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    response = JSONResponse(body, status_code=status, media_type="application/problem+json")
    if status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def static_file(name: str) -> Response:
    path = STATIC_DIR / name
    content_type = CONTENT_TYPES.get(path.suffix)
    if not _STATIC_NAME.fullmatch(name) or content_type is None or not path.is_file():
        return _problem(404, "no such file")
    return FileResponse(path, media_type=content_type, headers=SECURITY_HEADERS)


def user_turns(store: TurnStore, user_id: str) -> list[TurnView]:
    """The user's turns the store still holds, newest first."""
    return store.turns_of(user_id)


def _latest(views: list[TurnView], agent: str) -> AgentResult | None:
    # The latest turn may lack an agent (degraded), so look back for the last one that
    # answered: a belief does not vanish because one turn ran late.
    for view in views:
        result = view.agent(agent)
        if result is not None:
            return result
    return None


def _belief(result: AgentResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "turn_id": result.turn_id,
        "session_id": result.session_id,
        "created_at": result.created_at.isoformat(),
        "tier": result.tier,
        "payload": result.payload.model_dump(mode="json"),
    }


def create_web_router(store: TurnStore, keys: KeyRing, helplines: Helplines = SHIPPED) -> APIRouter:
    """``helplines``: what the gateway was configured with as it started."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def index() -> Response:
        return static_file("index.html")

    @router.get("/favicon.svg", include_in_schema=False)
    async def favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml", headers=SECURITY_HEADERS)

    @router.get("/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        return static_file(name)

    @router.get("/v1/me/beliefs")
    async def beliefs(authorization: str | None = Header(default=None)) -> Response:
        """What coachbus currently believes about the caller.

        The Shadow blackboard (stated goals with quotes, follow-through predictions,
        patterns with evidence) and the Persona profile (OCEAN with confidence,
        recurring goals, follow-through, growth opportunities), each as of the most
        recent turn this gateway saw it in; ``null`` when nothing is known yet.
        """
        caller = keys.resolve(authorization)
        if caller is None:
            return _problem(401, "missing or unknown API key")
        views = user_turns(store, caller.user_id)
        body = {
            "user_id": caller.user_id,
            "shadow": _belief(_latest(views, "shadow")),
            "persona": _belief(_latest(views, "persona")),
        }
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    @router.get("/v1/help-lines")
    async def help_lines(language: Language = "en") -> Response:
        """Help lines for someone in crisis, with the web chat's labels, in ``language``.

        Public on purpose (no key): a person in crisis must see them before signing in
        and when their key fails. They are the lines crisis replies carry, from the same
        file: the locale ``COACHBUS_LOCALE`` names, else the language's default.
        """
        body = helplines.as_json(language)
        # no-cache: an operator's corrected number shows on the next visit after a restart.
        return JSONResponse(body, headers={"Cache-Control": "no-cache"})

    return router
