"""Generated interface documents, committed under docs/ so a change shows in review:
one AsyncAPI document per service and the gateway's OpenAPI document.

``coachbus docs`` regenerates them; the suite fails when they drift from the code.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from coachbus.roster import SERVICES


def asyncapi(service: str) -> dict[str, Any]:
    module = importlib.import_module(f"services.{service}.main")
    document: dict[str, Any] = module.app.schema.to_specification().to_jsonable()
    return with_contracts(document)


def with_contracts(document: dict[str, Any]) -> dict[str, Any]:
    """Put each Kafka channel's contract in as its messages' payload schema.

    FastStream derives a payload from the handler's signature; ours take the raw
    message (decoding and dead-lettering are the bus's), so it has none to show.
    """
    from coachbus.schemas import topic_schema
    from coachbus.settings import CoachbusSettings
    from coachbus.topics import Topic

    prefix = CoachbusSettings().topic_prefix
    components = document.setdefault("components", {})
    schemas, messages = components.setdefault("schemas", {}), components.get("messages", {})
    for channel in document.get("channels", {}).values():
        name = channel.get("bindings", {}).get("kafka", {}).get("topic", "")
        try:
            topic = Topic(name.removeprefix(prefix))
        except ValueError:
            continue
        schema, definitions = topic_schema(topic)
        schemas.update(definitions)
        for ref in channel.get("messages", {}).values():
            message = messages.get(ref.get("$ref", "").rsplit("/", 1)[-1])
            if message is None:
                continue
            payload = message.get("payload", {}).get("$ref", "").rsplit("/", 1)[-1]
            if payload in schemas:
                schemas[payload] = schema
            else:
                message["payload"] = schema
    return document


def openapi() -> dict[str, Any]:
    module = importlib.import_module("services.gateway.handlers")
    document: dict[str, Any] = module.api.openapi()
    return document


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def documents() -> dict[str, str]:
    """Relative path under docs/ → content."""
    out = {f"asyncapi/{name}.json": render(asyncapi(name)) for name in SERVICES}
    out["openapi.json"] = render(openapi())
    return out


def write(root: Path) -> list[str]:
    changed = []
    for relative, content in documents().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            changed.append(relative)
    return changed


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="coachbus docs", description=__doc__)
    parser.add_argument("--out", default="docs", help="the docs folder")
    args = parser.parse_args(argv)
    changed = write(Path(args.out))
    print(f"{len(changed)} documents updated" + (": " + ", ".join(changed) if changed else ""))
    return 0
