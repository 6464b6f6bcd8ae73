"""``coachbus chat`` shows the synthesis as it streams, then only what the final adds."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import httpx
import pytest

from coachbus.chat import one_turn, watch_for_human

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


def test_a_turn_that_went_to_a_human_is_watched_for_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watched: list[str] = []
    monkeypatch.setattr(
        "coachbus.chat.watch_for_human", lambda _u, _h, turn_id, _o: watched.append(turn_id)
    )
    out = io.StringIO()
    events: list[tuple[str, dict[str, Any]]] = [
        ("coach", {"text": "Thank you for telling me."}),
        ("agent", {"agent": "stability", "payload": {"crisis": {"escalated": True}}}),
        ("final", _final("Please call 988.")),
    ]
    with _client(events) as client:
        one_turn(client, "http://gw", "key", "s", "hi", out)
    # Went to a human: the terminal says so and watches for the answer meanwhile.
    assert "a human coach has been asked" in out.getvalue()
    for _ in range(100):
        if watched:
            break
        time.sleep(0.01)
    assert watched == ["t1"]


def test_an_answer_before_the_final_is_shown_at_once() -> None:
    out = io.StringIO()
    events: list[tuple[str, dict[str, Any]]] = [
        ("human", {"text": "Carol from the care team here."}),
        ("final", _final("Please call 988.")),
    ]
    with _client(events) as client:
        one_turn(client, "http://gw", "key", "s", "hi", out)
    assert "human › Carol from the care team here." in out.getvalue()


def test_the_watcher_shows_the_answer_from_the_held_stream() -> None:
    out = io.StringIO()
    body = "".join(
        f"event: {e}\ndata: {json.dumps(d)}\n\n"
        for e, d in [("final", _final("Please call 988.")), ("human", {"text": "Carol here."})]
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})

    got = watch_for_human(
        "http://gw", {}, "t1", out, wait_s=1, transport=httpx.MockTransport(answer)
    )
    assert got == "Carol here." and "human › Carol here." in out.getvalue()


def test_the_watcher_asks_for_the_turn_when_the_stream_ended_without_it() -> None:
    out = io.StringIO()
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path.endswith("/events"):
            body = f"event: final\ndata: {json.dumps(_final('x'))}\n\n"
            return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})
        human = [{"text": "Rita here."}] if len(asked) > 2 else []
        return httpx.Response(200, json={"human": human})

    got = watch_for_human(
        "http://gw", {}, "t1", out, wait_s=5, poll_s=0.01, transport=httpx.MockTransport(answer)
    )
    assert got == "Rita here." and asked[0].endswith("/events") and len(asked) == 3
