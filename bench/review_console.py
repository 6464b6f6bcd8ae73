"""The review console (``/review``) in headless Chromium over a queue of a given size.

The page is driven over the DevTools protocol (``tests/browser/cdp.py``: Debian's
``chromium``, no WebDriver). Every time is taken inside the page, on its own clock,
so the protocol's round trips are not in it:

* **first render**: from navigation start (the page's time origin) to every open
  item in the queue's list and the count showing their number (a MutationObserver
  installed before the page's own script runs), and to the next frame after it
  (``requestAnimationFrame`` then a task: the rows painted);
* **live**: the live queue connected and its snapshot rendered (the queue is drawn
  once from ``GET /v1/review`` and again from the stream's ``snapshot``);
* **item view**: from a click on a row to that item's view filled in (its age,
  claim and outcomes) and painted, for rows at the top, middle and bottom;
* **a claim seen**: another reviewer claims an item through the API; from the
  request on this process's wall clock to the row showing the claim in the page
  (``Date.now()``: one machine, one clock), three times;
* **main thread**: Chromium's own task, script and layout time (``Performance.getMetrics``)
  for the load, and the share of a core the page uses while it sits idle (ages
  count up every second).

The key reaches the page as a reviewer's earlier sign-in would leave it: in the
tab's session storage, set before the page's script reads it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.browser.cdp import Chromium, Page

KEY_STORE = "coachbus.review.key"  # services/gateway/static/review.js

# Installed before any of the page's own script: marks the first and the complete
# render of the queue, the frame after it, each redraw of the list, and the live
# queue going on.
_PROBE = """(() => {
  if (location.origin !== %(origin)s || location.pathname !== "/review") return;
  sessionStorage.setItem(%(store)s, %(key)s);
  const want = %(count)d;
  const marks = (window.__bench = { renders: [] });
  const mark = (name) => { if (!(name in marks)) marks[name] = performance.now(); };
  const observer = new MutationObserver((records) => {
    const queue = document.getElementById("queue");
    const count = document.getElementById("queue-count");
    const live = document.getElementById("live");
    if (!queue || !count) return;
    // Each drawing of the queue ends by writing the count, replacing its text node
    // even when the number is the same: one mark per drawing, whatever it changed
    // (the parser's first "0" replaces nothing and is not one).
    for (const r of records) {
      if (r.target === count && r.type === "childList" && r.removedNodes.length) {
        marks.renders.push(performance.now());
      }
    }
    if (live && live.dataset.state === "on") mark("live_on");
    if (queue.childElementCount > 0) mark("first_row");
    if (!("all_rows" in marks) && queue.childElementCount === want
        && count.textContent === String(want)) {
      mark("all_rows");
      requestAnimationFrame(() => setTimeout(() => mark("painted"), 0));
    }
  });
  observer.observe(document, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["data-state"],
  });
  window.__benchStop = () => observer.disconnect();
})();"""

_OPEN_ITEM = """(async (id) => {
  const li = document.querySelector(`#queue li[data-item="${CSS.escape(id)}"]`);
  const since = li.querySelector(".age").dataset.since;
  const item = document.getElementById("item");
  const ready = () => !item.hidden
    && document.getElementById("item-age").dataset.since === since
    && document.getElementById("outcome").options.length > 0;
  const started = performance.now();
  li.click();
  await new Promise((resolve) => {
    if (ready()) return resolve();
    const watch = new MutationObserver(() => { if (ready()) { watch.disconnect(); resolve(); } });
    watch.observe(item, { subtree: true, childList: true, attributes: true, characterData: true });
  });
  const shown = performance.now() - started;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return { shown_ms: shown, painted_ms: performance.now() - started };
})(%s)"""

_WATCH_CLAIM = """((id, who) => {
  window.__claimSeen = null;
  const queue = document.getElementById("queue");
  const watch = new MutationObserver(() => {
    const li = queue.querySelector(`li[data-item="${CSS.escape(id)}"]`);
    if (li && li.dataset.claimed === who) { window.__claimSeen = Date.now(); watch.disconnect(); }
  });
  watch.observe(queue, {
    subtree: true, childList: true, attributes: true, attributeFilter: ["data-claimed"],
  });
  return true;
})(%s, %s)"""

METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def _metrics(page: Page) -> dict[str, float]:
    found = page.send("Performance.getMetrics")["metrics"]
    return {m["name"]: float(m["value"]) for m in found}


def _wait(page: Page, expression: str, timeout: float, what: str) -> Any:
    return page.wait_for(expression, timeout=timeout, what=what)


def measure_page(
    browser: Chromium,
    url: str,
    key: str,
    count: int,
    *,
    open_items: list[str],
    claims: list[str],
    claim: Callable[[str], None],
    claimant: str,
    idle_s: float,
    timeout: float = 120.0,
) -> dict[str, Any]:
    """One fresh page of the console over a queue of ``count`` open items.

    ``open_items``: the rows whose item view is timed, in this order. ``claims``: the
    items ``claim`` has ``claimant`` claim, one after another, each timed to its row
    showing it.
    """
    page = browser.new_page()
    try:
        page.send("Performance.enable")
        origin = url.rstrip("/")
        probe = _PROBE % {
            "origin": json.dumps(origin),
            "store": json.dumps(KEY_STORE),
            "key": json.dumps(key),
            "count": count,
        }
        page.send("Page.addScriptToEvaluateOnNewDocument", {"source": probe})
        page.goto(f"{origin}/review", timeout=timeout)
        _wait(page, "window.__bench.painted", timeout, f"{count} rows rendered")
        # Settled: the live queue is on and its snapshot drawn after it.
        _wait(
            page,
            "window.__bench.live_on !== undefined"
            " && window.__bench.renders.some((t) => t >= window.__bench.live_on)",
            timeout,
            "the live queue's snapshot rendered",
        )
        page.js("window.__benchStop()")
        marks = page.js("window.__bench")
        live_at = float(marks["live_on"])
        after_live = [t for t in marks["renders"] if t >= live_at]
        load = _metrics(page)
        rows = page.js("document.querySelectorAll('#queue > li').length")
        shown_count = page.js("document.getElementById('queue-count').textContent")
        nodes = page.js("document.getElementsByTagName('*').length")

        before = _metrics(page)
        time.sleep(idle_s)
        after = _metrics(page)
        idle_busy = (after["TaskDuration"] - before["TaskDuration"]) / idle_s

        views = [page.js(_OPEN_ITEM % json.dumps(item_id)) for item_id in open_items]

        claims_ms: list[float] = []
        for item_id in claims:
            page.js(_WATCH_CLAIM % (json.dumps(item_id), json.dumps(claimant)))
            started = time.time()
            claim(item_id)
            seen = _wait(page, "window.__claimSeen", timeout, "the claim in the queue")
            claims_ms.append(float(seen) - started * 1000)
        return {
            "items": count,
            "rows": rows,
            "count_shown": shown_count,
            "first_row_ms": marks["first_row"],
            "all_rows_ms": marks["all_rows"],
            "painted_ms": marks["painted"],
            "live_ms": after_live[0],
            "queue_renders_at_load": len(marks["renders"]),
            "queue_renders_ms": marks["renders"],
            "dom_elements": nodes,
            "load_main_thread_s": {m: load[m] for m in METRICS},
            "js_heap_mib": load["JSHeapUsedSize"] / 2**20,
            "idle_busy_share": idle_busy,
            "item_views": views,
            "claims_seen_ms": claims_ms,
            "problems": page.problems(),
        }
    finally:
        page.close()
