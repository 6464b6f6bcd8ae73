"""Fixtures for the deployment tests; paths and helpers live in deploy_support."""

from __future__ import annotations

import shutil

import pytest

from tests.deploy.deploy_support import missing_tool


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing_tool("promtool not found (Debian/Ubuntu package: prometheus)")
    assert path is not None
    return path
