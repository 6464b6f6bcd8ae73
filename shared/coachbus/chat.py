"""``coachbus chat``: talk to a running gateway from the terminal.

Shows the Coach's reply at once, a live progress line while the agents work, then
the synthesized reply, growing sentence by sentence while Synth streams it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

import httpx

from coachbus.contracts.payloads import AGENTS


def _events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event:
            yield event, json.loads(line[6:])
            event = None


def _progress(done: dict[str, float], started: float) -> str:
    marks = " ".join(f"{a} {'✓' if a in done else '…'}" for a in AGENTS)
    return f"\r  [{time.monotonic() - started:5.1f}s] {marks}"


def one_turn(
    client: httpx.Client, url: str, key: str, session: str, text: str, out: TextIO
) -> dict[str, Any] | None:
    headers = {"Authorization": f"Bearer {key}"}
    started = time.monotonic()
    response = client.post(
        f"{url}/v1/sessions/{session}/messages", json={"text": text}, headers=headers
    )
    if response.status_code != 202:
        detail = response.json().get("detail", response.text) if response.content else ""
        out.write(f"! {response.status_code}: {detail}\n")
        return None
    turn_id = response.json()["turn_id"]
    done: dict[str, float] = {}
    final: dict[str, Any] | None = None
    interactive = out.isatty()
    streamed = ""  # the synthesis shown so far, from its final_delta pieces
    to_a_human = answered = False
    with client.stream("GET", f"{url}/v1/turns/{turn_id}/events", headers=headers) as stream:
        for event, data in _events(stream):
            if event == "coach":
                out.write(f"\ncoach › {data['text']}\n")
            elif event == "agent":
                done[data["agent"]] = data.get("latency_ms", 0.0)
                crisis = (data.get("payload") or {}).get("crisis") or {}
                if data["agent"] == "stability" and crisis.get("escalated"):
                    to_a_human = True
            elif event == "human":
                out.write(f"\nhuman › {data['text']}\n")
                answered = True
                if interactive and not streamed:
                    out.write(_progress(done, started))
                    out.flush()
            elif event == "final_delta":
                if not streamed:
                    if interactive:
                        out.write("\r" + " " * 90 + "\r")
                    out.write("\ncoachbus › ")
                streamed += data["text"]
                out.write(data["text"])
                out.flush()
            elif event == "final":
                final = data
                break
            elif event == "timeout":
                break
    if interactive and not streamed:
        out.write("\r" + " " * 90 + "\r")
    if final is None:
        out.write(
            "\n! no synthesized reply in time\n" if streamed else "! no synthesized reply in time\n"
        )
        return None
    note = (
        " (degraded: " + ", ".join(final["missing_agents"]) + " missing)"
        if final["degraded"]
        else ""
    )
    if streamed and final["text"].startswith(streamed):
        # The final completes what was streamed: only the rest is written.
        out.write(f"{final['text'][len(streamed) :]}{note}\n")
    elif streamed:
        # Not a continuation (a restarted stream): the final replaces it, in full.
        out.write(f"\n\ncoachbus › {final['text']}{note}\n")
    else:
        out.write(f"\ncoachbus › {final['text']}{note}\n")
    out.write(f"  [{time.monotonic() - started:.1f}s, {len(done)} agents]\n\n")
    if to_a_human and not answered:
        out.write("  (a human coach has been asked to read this and may reply here)\n\n")
        threading.Thread(
            target=watch_for_human,
            args=(url, headers, turn_id, out),
            name=f"human-{turn_id}",
            daemon=True,
        ).start()
    out.flush()
    return final


# How long the terminal waits for a reviewer's answer to a turn, and how often it asks
# for the turn when its stream has ended without one.
HUMAN_WAIT_S = 900.0
HUMAN_POLL_S = 5.0


def watch_for_human(
    url: str,
    headers: dict[str, str],
    turn_id: str,
    out: TextIO,
    *,
    wait_s: float = HUMAN_WAIT_S,
    poll_s: float = HUMAN_POLL_S,
    transport: httpx.BaseTransport | None = None,
) -> str | None:
    """Show a reviewer's answer to ``turn_id`` the moment it comes: the gateway holds
    the turn's stream open for it; if the stream ends first (a newer turn's stream
    took the hold, a proxy cut it), the turn is asked for until ``wait_s`` passes."""
    give_up = time.monotonic() + wait_s
    with httpx.Client(timeout=httpx.Timeout(10.0, read=wait_s), transport=transport) as client:
        try:
            with client.stream(
                "GET", f"{url}/v1/turns/{turn_id}/events", headers=headers
            ) as stream:
                for event, data in _events(stream):
                    if event == "human":
                        out.write(f"\nhuman › {data['text']}\n")
                        out.flush()
                        return str(data["text"])
        except httpx.HTTPError:
            pass  # asked for below
        while time.monotonic() < give_up:
            time.sleep(poll_s)
            try:
                snapshot = client.get(f"{url}/v1/turns/{turn_id}", headers=headers).json()
            except (httpx.HTTPError, ValueError):
                continue
            for reply in snapshot.get("human") or []:
                out.write(f"\nhuman › {reply['text']}\n")
                out.flush()
                return str(reply["text"])
    return None


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="coachbus chat", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("COACHBUS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COACHBUS_KEY"))
    parser.add_argument("--session", default=time.strftime("cli-%Y%m%d-%H%M%S"))
    parser.add_argument("message", nargs="*", help="send this one message and exit")
    args = parser.parse_args(argv)
    if not args.key:
        parser.error("an API key is needed: --key or COACHBUS_KEY (make run prints one)")
    with httpx.Client(timeout=httpx.Timeout(10.0, read=120.0)) as client:
        if args.message:
            final = one_turn(
                client, args.url, args.key, args.session, " ".join(args.message), sys.stdout
            )
            return 0 if final is not None else 1
        print(f"session {args.session} — an empty line or Ctrl-D ends it")
        for line in sys.stdin:
            text = line.strip()
            if not text:
                break
            one_turn(client, args.url, args.key, args.session, text, sys.stdout)
    return 0
