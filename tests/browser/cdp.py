"""A tiny Chrome DevTools Protocol client for the browser tests.

It talks to Debian's ``chromium`` over ``--remote-debugging-pipe`` (JSON messages
separated by NUL bytes on file descriptors 3 and 4), so the tests need no browser
download, no WebDriver, no websocket library and no free port: only the
``chromium`` package.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")


def find_chromium() -> str | None:
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


class CdpError(RuntimeError):
    pass


class Chromium:
    """One headless browser process and its protocol connection."""

    def __init__(self, binary: str, *, width: int = 1280, height: int = 860) -> None:
        self._binary = binary
        self._size = (width, height)
        self._profile = tempfile.TemporaryDirectory(prefix="coachbus-chromium-")
        self._next_id = 0
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # Chromium expects its end of the pipes as fds 3 and 4 exactly. Lift them above
        # both first so neither is overwritten by the other's dup2, then let a small
        # launcher (Python: dash cannot redirect fds above 9) put them in place.
        child_in = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        child_out = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)
        width, height = self._size
        flags = [
            "--headless",
            "--no-sandbox",  # we run as root in CI; the sandbox refuses to start then
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-dev-shm-usage",  # small /dev/shm in containers
            "--hide-scrollbars",
            "--mute-audio",
            f"--window-size={width},{height}",
            f"--user-data-dir={self._profile.name}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        launcher = (
            "import os, sys\n"
            f"os.dup2({child_in}, 3); os.dup2({child_out}, 4)\n"
            f"os.close({child_in}); os.close({child_out})\n"
            "os.execv(sys.argv[1], sys.argv[1:])\n"
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-c", launcher, self._binary, *flags],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._changed:
                    self._events.append({"method": "<closed>"})
                    self._changed.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._changed:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self._events.append(message)
                self._changed.notify_all()

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = 30,
    ) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            self._out.write(json.dumps(message).encode() + b"\0")
        with self._changed:
            if not self._changed.wait_for(lambda: ident in self._replies, timeout):
                raise CdpError(f"{method}: no answer in {timeout} s")
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def events(self, method: str, session: str | None = None) -> list[dict[str, Any]]:
        with self._changed:
            return [
                e
                for e in self._events
                if e.get("method") == method and (session is None or e.get("sessionId") == session)
            ]

    def wait_event(self, method: str, session: str, after: int, timeout: float) -> None:
        """Wait until more than ``after`` events of ``method`` arrived for ``session``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.events(method, session)) <= after:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise CdpError(f"no {method} in {timeout} s")
                self._changed.wait(remaining)

    def new_page(self) -> Page:
        """A tab in a fresh browser context: no storage shared with earlier pages."""
        context = self.send("Target.createBrowserContext")["browserContextId"]
        target = self.send(
            "Target.createTarget", {"url": "about:blank", "browserContextId": context}
        )["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session, context)
        for domain in ("Page", "Runtime", "Log"):
            page.send(f"{domain}.enable")
        return page

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(CdpError, OSError):
                self.send("Browser.close", timeout=5)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        for stream in (getattr(self, "_out", None), getattr(self, "_in", None)):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._profile.cleanup()


class Page:
    def __init__(self, browser: Chromium, session: str, context: str) -> None:
        self.browser = browser
        self.session = session
        self.context = context

    def close(self) -> None:
        self.browser.send("Target.disposeBrowserContext", {"browserContextId": self.context})

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, session=self.session)

    def goto(self, url: str, timeout: float = 30) -> None:
        seen = len(self.browser.events("Page.loadEventFired", self.session))
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CdpError(f"navigating to {url}: {result['errorText']}")
        self.browser.wait_event("Page.loadEventFired", self.session, seen, timeout)

    def js(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"{expression!r} threw: {text}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30, what: str = "") -> Any:
        """Poll a JavaScript expression until it is truthy; return its value."""
        deadline = time.monotonic() + timeout
        # Judge truthiness in JavaScript: an element comes back by value as {}, which
        # Python would call false, and an empty array the other way round.
        probe = f"((v) => ({{ok: !!v, value: v instanceof Node ? true : v}}))({expression})"
        while True:
            outcome = self.js(probe)
            if outcome["ok"]:
                return outcome["value"]
            if time.monotonic() > deadline:
                status = self.js("document.getElementById('status')?.textContent ?? ''")
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what or expression}"
                    f" (page status: {status!r}; problems: {self.problems()})"
                )
            time.sleep(0.1)

    def _centre(self, selector: str) -> tuple[float, float]:
        box = self.js(
            f"""(() => {{
                const node = document.querySelector({json.dumps(selector)});
                if (!node) return null;
                node.scrollIntoView({{block: "center", inline: "center"}});
                const r = node.getBoundingClientRect();
                return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null;
            }})()"""
        )
        if not box:
            raise AssertionError(f"{selector} is not on the page or not visible")
        return float(box[0]), float(box[1])

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre, as a person would make it."""
        x, y = self._centre(selector)
        hit = self.js(
            f"document.elementFromPoint({x}, {y})?.closest({json.dumps(selector)}) !== null"
        )
        if not hit:
            raise AssertionError(f"{selector} is covered by another element")
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def type(self, selector: str, text: str) -> None:
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def set_viewport(self, width: int, height: int, mobile: bool = False) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def problems(self) -> list[str]:
        """Uncaught exceptions, console errors and CSP violations seen so far."""
        out: list[str] = []
        for event in self.browser.events("Runtime.exceptionThrown", self.session):
            details = event["params"]["exceptionDetails"]
            out.append(details.get("exception", {}).get("description") or details.get("text"))
        for event in self.browser.events("Runtime.consoleAPICalled", self.session):
            if event["params"]["type"] == "error":
                args = event["params"].get("args", [])
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in args))
        for event in self.browser.events("Log.entryAdded", self.session):
            entry = event["params"]["entry"]
            if entry["level"] == "error":
                # The address too: "Failed to load resource: 404" alone does not say which.
                where = f" ({entry['url']})" if entry.get("url") else ""
                out.append(f"{entry.get('source')}: {entry.get('text')}{where}")
        return out


@contextlib.contextmanager
def chromium(binary: str, **size: int) -> Iterator[Chromium]:
    browser = Chromium(binary, **size)
    browser.start()
    try:
        yield browser
    finally:
        browser.close()
