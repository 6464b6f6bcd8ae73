"""Generated interface documents, committed under docs/ so a change shows in review:
one AsyncAPI document per service and the gateway's OpenAPI document.

``coachbus docs`` regenerates them; the suite fails when they drift from the code.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

SERVICES = ("gateway", "shadow", "persona", "plasticity", "stability", "coach", "synth")


def asyncapi(service: str) -> dict[str, Any]:
    module = importlib.import_module(f"services.{service}.main")
    document: dict[str, Any] = module.app.schema.to_specification().to_jsonable()
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
