"""The committed interface documents match the code (regenerate with `make docs`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _fresh_documents() -> dict[str, str]:
    # A fresh interpreter: other tests add handlers to the services' brokers, which
    # would show up in documents generated inside this process.
    out = subprocess.run(
        [sys.executable, "-c", "import json; from coachbus.docs import documents; "
         "print(json.dumps(documents()))"],
        capture_output=True, text=True, check=True, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("COACHBUS_", "KAFKA_"))},
    )  # fmt: skip
    docs: dict[str, str] = json.loads(out.stdout.splitlines()[-1])
    return docs


def test_committed_documents_match_the_code() -> None:
    drift = [
        relative
        for relative, content in _fresh_documents().items()
        if not (DOCS / relative).exists() or (DOCS / relative).read_text() != content
    ]
    assert not drift, f"documents out of date (run `make docs`): {drift}"


def test_asyncapi_names_every_topic_a_service_touches() -> None:
    shadow = (DOCS / "asyncapi" / "shadow.json").read_text()
    assert "coachbus.user-messages" in shadow
    assert "coachbus.agent.shadow" in shadow
    synth = (DOCS / "asyncapi" / "synth.json").read_text()
    assert "coachbus.replies" in synth
