"""The committed interface documents match the code (regenerate with `make docs`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

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


def _payload_validator(document: dict[str, Any], topic: str) -> Draft202012Validator:
    """The JSON Schema validator of what ``document`` says ``topic`` carries."""
    channel = next(
        c
        for c in document["channels"].values()
        if c.get("bindings", {}).get("kafka", {}).get("topic") == topic
    )
    message = next(iter(channel["messages"].values()))["$ref"].rsplit("/", 1)[-1]
    payload = document["components"]["messages"][message]["payload"]
    # Payload references point into the document's components: validate from a root
    # that has them.
    return Draft202012Validator({**payload, "components": document["components"]})


def test_asyncapi_payloads_are_the_topics_contracts() -> None:
    from coachbus.bus.codec import encode
    from coachbus.contracts import EraseRequest, PlasticityResult, Reply
    from services.plasticity import logic
    from tests.fixtures.agents import msg

    plasticity = json.loads((DOCS / "asyncapi" / "plasticity.json").read_text())
    inbound = _payload_validator(plasticity, "coachbus.user-messages")
    message = msg("I want to run three times a week.")
    assert inbound.is_valid(json.loads(encode(message)))
    erase = EraseRequest(turn_id="e1", session_id="s", user_id=message.user_id)
    assert inbound.is_valid(json.loads(encode(erase)))
    assert not inbound.is_valid({"kind": "message", "text": "no ids"})

    outbound = _payload_validator(plasticity, "coachbus.agent.plasticity")
    result = PlasticityResult.for_message(message, logic.plan(None, message), started=0.0)
    assert outbound.is_valid(json.loads(encode(result)))
    assert not outbound.is_valid(json.loads(encode(message)))

    synth = json.loads((DOCS / "asyncapi" / "synth.json").read_text())
    replies = _payload_validator(synth, "coachbus.replies")
    reply = Reply(turn_id="t", session_id="s", user_id="u", kind="final", text="done")
    assert replies.is_valid(json.loads(encode(reply)))
    assert not replies.is_valid({**json.loads(encode(reply)), "kind": "shout"})
