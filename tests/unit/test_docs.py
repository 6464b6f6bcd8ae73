"""The committed interface documents match the code (regenerate with `make docs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coachbus.docs import documents

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_documents_match_the_code() -> None:
    drift = [
        relative
        for relative, content in documents().items()
        if not (DOCS / relative).exists() or (DOCS / relative).read_text() != content
    ]
    assert not drift, f"documents out of date (run `make docs`): {drift}"


def test_asyncapi_names_every_topic_a_service_touches() -> None:
    shadow = (DOCS / "asyncapi" / "shadow.json").read_text()
    assert "coachbus.user-messages" in shadow
    assert "coachbus.agent.shadow" in shadow
    synth = (DOCS / "asyncapi" / "synth.json").read_text()
    assert "coachbus.replies" in synth
