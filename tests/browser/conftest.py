"""Browser fixtures: Debian's headless Chromium, and the real stack from the integration tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.browser.cdp import Chromium, Page, chromium, find_chromium

# The whole pipeline as separate processes on the real broker, shared with the
# integration tests (same keys, same configuration).
from tests.integration.conftest import running_stack  # noqa: F401


@pytest.fixture(scope="session")
def chromium_binary() -> str:
    # Session scope so a missing browser skips before the (module-scoped) stack starts.
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
