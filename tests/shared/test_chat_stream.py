"""``coachbus chat`` shows the synthesis as it streams, then only what the final adds."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from coachbus.chat import one_turn

pytestmark = pytest.mark.unit


def _client(events: list[tuple[str, dict[str, Any]]]) -> httpx.Client:
    body = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"turn_id": "t1"})
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    return httpx.Client(transport=httpx.MockTransport(answer))


def _final(text: str) -> dict[str, Any]:
    return {"text": text, "degraded": False, "missing_agents": []}


def test_the_synthesis_grows_then_the_final_completes_it() -> None:
    out = io.StringIO()
    events: list[tuple[str, dict[str, Any]]] = [
        ("coach", {"text": "First thoughts."}),
        ("agent", {"agent": "shadow", "latency_ms": 3.0}),
        ("final_delta", {"text": "Thanks for telling me.", "seq": 0}),
        ("final_delta", {"text": " Which day suits?", "seq": 1}),
        ("final", _final("Thanks for telling me. Which day suits? Take your time.")),
    ]
    with _client(events) as client:
        final = one_turn(client, "http://gw", "key", "s", "hi", out)
    assert final is not None
    text = out.getvalue()
    assert "coachbus › Thanks for telling me. Which day suits? Take your time.\n" in text
    assert text.count("Thanks for telling me.") == 1


def test_a_final_that_does_not_continue_the_stream_is_shown_whole() -> None:
    out = io.StringIO()
    events: list[tuple[str, dict[str, Any]]] = [
        ("final_delta", {"text": "A first stream.", "seq": 0}),
        ("final", _final("Another reply.")),
    ]
    with _client(events) as client:
        one_turn(client, "http://gw", "key", "s", "hi", out)
    assert "A first stream.\n\ncoachbus › Another reply.\n" in out.getvalue()
    assert "coachbus › A first stream." in out.getvalue()
