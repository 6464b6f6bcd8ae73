"""Architecture rules that code review alone would miss."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SERVICES = sorted(p.name for p in (ROOT / "services").iterdir() if (p / "main.py").exists())


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_all_seven_services_exist() -> None:
    assert (
        sorted(["gateway", "shadow", "persona", "plasticity", "stability", "coach", "synth"])
        == SERVICES
    )


@pytest.mark.parametrize("service", SERVICES)
def test_no_service_imports_another(service: str) -> None:
    for path in (ROOT / "services" / service).rglob("*.py"):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "services" and len(parts) > 1:
                assert parts[1] == service, f"{path.relative_to(ROOT)} imports {name}"


def test_shared_library_imports_no_service() -> None:
    for path in (ROOT / "shared" / "coachbus").rglob("*.py"):
        for name in _imports(path):
            assert not name.startswith("services"), f"{path.relative_to(ROOT)} imports {name}"
