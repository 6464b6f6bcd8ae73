"""The web chat in a real (headless) Chromium against the whole pipeline on the broker."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.browser.cdp import Page
from tests.integration.conftest import KEYS, RunningStack

pytestmark = [pytest.mark.broker, pytest.mark.slow]

USER = "bob"
TIERS = {"deterministic", "small", "strong", "human"}
# Markup inside a message must show as text; it must never become an element.
MESSAGE = (
    "I want to finish my thesis by March, but I keep reorganising my notes instead "
    'of writing. <img src="x" id="injected"> Tonight I watched videos again.'
)


def q(selector: str) -> str:
    """A selector as a JavaScript string literal."""
    return json.dumps(selector)


def text_of(page: Page, selector: str) -> str:
    value = page.js(f"document.querySelector({q(selector)})?.textContent ?? ''")
    return str(value)


def open_chat(page: Page, url: str) -> Page:
    page.goto(f"{url}/")
    page.wait_for("document.getElementById('key-input')?.offsetParent !== null", what="key entry")
    page.type("#key-input", KEYS[USER])
    page.click("#key-form button[type=submit]")
    page.wait_for(f"document.getElementById('user-id').textContent === {q(USER)}", what="signed in")
    return page


def test_a_turn_through_the_web_chat(
    running_stack: RunningStack, page: Page, tmp_path: Path
) -> None:
    rs = running_stack
    page = open_chat(page, rs.url)
    assert page.js("document.getElementById('key-form').hidden") is True
    assert re.fullmatch(
        r"web-[0-9a-f]{8}", page.js("document.getElementById('session-input').value")
    )

    page.type("#composer-text", MESSAGE)
    page.click("#send")

    # The user's bubble, with the markup shown as text and not turned into an element.
    page.wait_for("document.querySelector('li[data-kind=user]')", what="the user's bubble")
    assert text_of(page, "li[data-kind=user] .msg-text") == MESSAGE
    assert page.js("document.getElementById('injected') === null") is True
    assert page.js("document.querySelectorAll('#messages img').length") == 0

    # The Coach's quick reply first, labelled as such, then the synthesis below it.
    page.wait_for(
        "document.querySelector('li[data-kind=coach] .msg-text')?.textContent.length > 0",
        timeout=60,
        what="the coach's first thoughts",
    )
    assert text_of(page, "li[data-kind=coach] .msg-label") == "First thoughts"
    page.wait_for(
        "document.querySelector('li[data-kind=final] .msg-text')?.textContent.length > 0",
        timeout=60,
        what="the synthesized reply",
    )
    kinds = page.js("[...document.querySelectorAll('#messages > li')].map(li => li.dataset.kind)")
    assert kinds == ["user", "coach", "final"], kinds
    assert len(text_of(page, "li[data-kind=final] .msg-text")) > 20

    # The waterfall: one row per agent with its tier and latency, then the replies.
    rows = page.wait_for(
        """(() => {
            const rows = [...document.querySelectorAll('#timeline li[data-agent]')];
            if (rows.some(r => !r.dataset.tier)) return null;
            return rows.map(r => ({
                agent: r.dataset.agent,
                tier: r.dataset.tier,
                badge: r.querySelector('.tier')?.textContent,
                ms: r.querySelector('.wf-ms').textContent,
                bar: parseFloat(r.querySelector('.wf-bar').style.width),
                end: parseFloat(r.querySelector('.wf-bar').style.left)
                     + parseFloat(r.querySelector('.wf-bar').style.width),
            }));
        })()""",
        what="five agent rows with tiers",
    )
    assert [r["agent"] for r in rows] == ["shadow", "persona", "plasticity", "stability", "coach"]
    for row in rows:
        assert row["tier"] in TIERS, row
        assert row["badge"] == row["tier"], row
        assert re.fullmatch(r"\d+ ms|\d+\.\d\d s", row["ms"]), row
        assert 0 < row["bar"] <= 100, row
        assert row["end"] <= 100.5, row
    synthesis = text_of(page, "#timeline li[data-event=final] .wf-ms")
    assert re.fullmatch(r"\+(\d+ ms|\d+\.\d\d s)", synthesis), synthesis
    # The synthesis waits for every agent, so its marker sits at the end of the scale.
    assert page.js(
        "parseFloat(document.querySelector('#timeline .wf-dot-final').style.left)"
    ) == pytest.approx(100, abs=0.5)
    assert text_of(page, "#timeline-total").startswith("answered in ")

    # Beliefs refresh by themselves after the final; the goal from the message is there
    # with the user's own words, and the OCEAN profile has all five traits.
    page.wait_for(
        "[...document.querySelectorAll('#beliefs .goal .goal-text')]"
        ".some(g => /thesis/i.test(g.textContent))",
        what="the thesis goal in the beliefs view",
    )
    page.click("#refresh-beliefs")
    page.wait_for("document.querySelectorAll('#beliefs [data-trait]').length === 5", what="OCEAN")
    quotes = page.js(
        "[...document.querySelectorAll('#beliefs .goal .quote')].map(q => q.textContent)"
    )
    assert any("thesis" in quote for quote in quotes), quotes

    shot = page.screenshot(tmp_path / "web-chat-desktop.png")
    assert shot.stat().st_size > 20_000  # a blank page compresses to far less
    print(f"\nscreenshot: {shot}")

    # On a phone the panels stack under the chat and nothing scrolls sideways.
    page.set_viewport(390, 844, mobile=True)
    page.wait_for("window.innerWidth === 390", what="phone viewport")
    assert page.js("document.documentElement.scrollWidth <= window.innerWidth") is True
    print(f"screenshot: {page.screenshot(tmp_path / 'web-chat-phone.png')}")
    page.set_viewport(1280, 860)

    # Erase: a confirmation first, then the view is empty and stays empty.
    page.click("#erase")
    page.wait_for("document.getElementById('erase-dialog').open", what="the confirm dialog")
    page.click("#erase-confirm")
    page.wait_for("/Erased/.test(document.getElementById('status').textContent)", what="erased")
    page.wait_for(
        "document.querySelector('#beliefs [data-empty]') !== null"
        " && document.querySelectorAll('#beliefs .goal').length === 0",
        what="an empty beliefs view",
    )
    assert page.js("document.querySelectorAll('#messages > li').length") == 0
    assert page.js("document.querySelectorAll('#timeline li').length") == 0
    # Not only the page forgot: the gateway reports nothing known either.
    beliefs = httpx.get(f"{rs.url}/v1/me/beliefs", headers=rs.headers(USER), timeout=10).json()
    assert beliefs["shadow"] is None
    assert beliefs["persona"] is None

    assert page.problems() == []


def test_a_wrong_key_is_refused_on_the_page(running_stack: RunningStack, page: Page) -> None:
    page.goto(f"{running_stack.url}/")
    page.type("#key-input", "not-a-key")
    page.click("#key-form button[type=submit]")
    page.wait_for(
        "document.getElementById('status').dataset.kind === 'error'", what="an error message"
    )
    assert "not accepted" in text_of(page, "#status")
    assert page.js("document.getElementById('identity').hidden") is True
    assert page.js("sessionStorage.getItem('coachbus.key')") is None


def test_a_reviewers_answer_reaches_the_page(running_stack: RunningStack, page: Page) -> None:
    rs = running_stack
    page = open_chat(page, rs.url)
    page.type("#composer-text", "I don't want to live anymore, I keep thinking about ending it.")
    page.click("#send")
    page.wait_for(
        "/human coach has been asked/.test(document.querySelector('li[data-kind=final]')"
        "?.textContent ?? '')",
        timeout=60,
        what="the note that a human was asked",
    )
    turn_id = page.js("document.querySelector('li[data-kind=user]').dataset.turn")
    # The SSE stream closed with the final: only the page's polling can bring this in.
    answer = "This is Carol from the care team. I'm here; can we talk now?"
    reviewer = {"Authorization": f"Bearer {KEYS['carol']}"}
    deadline = 20.0
    with httpx.Client(base_url=rs.url, timeout=10) as client:
        for _ in range(int(deadline / 0.5)):
            response = client.post(f"/v1/review/{turn_id}", json={"text": answer}, headers=reviewer)
            if response.status_code != 404:  # the review request may still be on its way
                break
            time.sleep(0.5)
        assert response.status_code == 202, response.text
    page.wait_for(
        f"document.querySelector('li[data-kind=human] .msg-text')?.textContent === {q(answer)}",
        timeout=30,
        what="the reviewer's answer",
    )
    assert text_of(page, "li[data-kind=human] .msg-label") == "A human coach"
    assert page.problems() == []
