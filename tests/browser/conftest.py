"""Browser fixtures: Debian's headless Chromium. The real stack is the session's
shared ``running_stack`` (tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.browser.cdp import Chromium, Page, chromium, find_chromium


@pytest.fixture(scope="session")
def chromium_binary() -> str:
    # Session scope: looked for once; without it every browser test skips.
    found = find_chromium()
    if found is None:
        reason = "no chromium on PATH (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must install it", pytrace=False)
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def browser(chromium_binary: str) -> Iterator[Chromium]:
    # One browser for the module (starting one takes seconds); each test opens its
    # pages in a fresh browser context, so no storage leaks from one test to the next.
    with chromium(chromium_binary) as b:
        yield b


@pytest.fixture
def page(browser: Chromium) -> Iterator[Page]:
    opened = browser.new_page()
    yield opened
    opened.close()
