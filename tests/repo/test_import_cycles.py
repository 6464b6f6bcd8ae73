"""No module of shared/, services/ or evaluation/ imports itself back through others.

A cycle makes what a module sees at import depend on which module was imported
first (a half-initialised module), and it hides layering nobody chose. The graph is
read with ``ast``, without importing anything: an edge for every import a module
runs when it is imported (its top level, also inside ``try`` and ``if``; not inside
functions, nor under ``if TYPE_CHECKING``). ``from package import name`` is an edge to
``package.name`` when that is a module, else to ``package``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
# Where each top-level package's modules live (the import root, and its folders).
TREES = ((ROOT / "shared", "coachbus"), (ROOT, "services"), (ROOT, "evaluation"))


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for base, top in TREES:
        for path in sorted((base / top).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_at_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements a module executes when it is imported."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _type_checking(node.test):
                yield from _run_at_import(node.body)
            yield from _run_at_import(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse):
                yield from _run_at_import(block)
            yield from _run_at_import(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _run_at_import(node.body)


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of ``modules`` that importing ``name`` imports directly."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _run_at_import(ast.parse(path.read_text("utf-8")).body):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
            continue
        if node.level:  # relative: from the package, up level - 1
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            source = f"{base}.{node.module}" if node.module else base
        else:
            source = node.module or ""
        out.add(source)
        out.update(f"{source}.{alias.name}" for alias in node.names)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The shortest path from ``start`` back to itself, if there is one."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for dep in sorted(graph[node]):
                if dep == start:
                    return [*paths[node], start]
                if dep not in paths:
                    paths[dep] = [*paths[node], dep]
                    nxt.append(dep)
        frontier = nxt
    return None


def test_the_graph_sees_the_imports() -> None:
    graph = _graph()
    assert "coachbus.safety.screen" in graph["coachbus.safety.conversation"]
    # ``from coachbus import content`` imports the module coachbus.content.
    assert "coachbus.content" in graph["coachbus.safety.steps"]
    # Under TYPE_CHECKING: not run at import, so not an edge.
    assert "coachbus.bus.pacing" not in graph["coachbus.settings"]
    assert len(graph) > 100


def test_no_import_cycle() -> None:
    graph = _graph()
    cycles: list[str] = []
    seen: set[frozenset[str]] = set()
    for name in sorted(graph):
        cycle = _cycle_through(graph, name)
        if cycle is not None and frozenset(cycle) not in seen:
            seen.add(frozenset(cycle))
            cycles.append(" -> ".join(cycle))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
