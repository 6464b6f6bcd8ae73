"""The web chat shows the synthesis growing as Synth streams it, then the final in
its place. No broker: the gateway's app runs in a thread with a publish hook that
plays a turn's replies into its turn store, slowly enough to watch."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from pydantic import SecretStr

from coachbus.contracts import Reply, UserMessage
from coachbus.settings import ApiKey, CoachbusSettings
from services.gateway.api import create_api
from services.gateway.auth import KeyRing
from services.gateway.review import ReviewQueue
from services.gateway.turns import TurnStore
from tests.browser.cdp import Page

USER, KEY = "dana", "key-dana-0123456789"
PIECES = ["Thanks for telling me.", " Tidying feels safer than writing."]
FINAL = "Thanks for telling me. Tidying feels safer than writing. Which day suits you?"
AGENTS = ["shadow", "persona", "plasticity", "stability", "coach"]


def _reply(turn: str, kind: str, text: str, **extra: object) -> Reply:
    fields = {"turn_id": turn, "session_id": "web", "user_id": USER, "kind": kind, "text": text}
    return Reply.model_validate({**fields, **extra})


@pytest.fixture
def gateway() -> Iterator[tuple[str, threading.Event]]:
    """The gateway's app on a free port; the final waits until the test sets ``release``."""
    store = TurnStore()
    release = threading.Event()

    async def play(turn: str) -> None:
        await store.add_reply(_reply(turn, "coach", "First thoughts."))
        for seq, text in enumerate(PIECES):
            await asyncio.sleep(0.05)
            await store.add_reply(_reply(turn, "final_delta", text, seq=seq))
        while not release.is_set():
            await asyncio.sleep(0.02)
        # Every agent missing: the store shows the final at once, without a grace.
        await store.add_reply(_reply(turn, "final", FINAL, degraded=True, missing_agents=AGENTS))

    async def publish(message: object) -> None:
        if isinstance(message, UserMessage):
            asyncio.get_running_loop().create_task(play(message.turn_id))

    ring = KeyRing([ApiKey(user_id=USER, key=SecretStr(KEY))])
    api = create_api(CoachbusSettings(), ring, store, publish, ReviewQueue(), publish)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(api, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", release
    finally:
        release.set()
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_the_synthesis_grows_as_it_streams_then_the_final_takes_its_place(
    gateway: tuple[str, threading.Event], page: Page
) -> None:
    url, release = gateway
    page.goto(f"{url}/")
    page.wait_for("document.getElementById('key-input')?.offsetParent !== null", what="key")
    page.type("#key-input", KEY)
    page.click("#key-form button[type=submit]")
    page.wait_for(
        f"document.getElementById('user-id').textContent === {json.dumps(USER)}",
        what="signed in",
    )
    page.type("#composer-text", "I keep reorganising my notes.")
    page.click("#send")

    # Both streamed sentences are shown, in a bubble of its own, before the final.
    shown = "".join(PIECES)
    page.wait_for(
        "document.querySelector('li[data-kind=draft] .msg-text')?.textContent === "
        + json.dumps(shown),
        what="the streamed sentences",
    )
    assert page.js("document.querySelector('li[data-kind=final]') === null") is True
    assert page.js("document.querySelector('li[data-kind=draft]').getAttribute('aria-busy')") == (
        "true"
    )

    release.set()
    page.wait_for("document.querySelector('li[data-kind=final]')", what="the final")
    kinds = page.js("[...document.querySelectorAll('#messages > li')].map(li => li.dataset.kind)")
    assert kinds == ["user", "coach", "final"], kinds
    text = page.js("document.querySelector('li[data-kind=final] .msg-text').textContent")
    assert text == FINAL
    assert page.problems() == []
