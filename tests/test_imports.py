"""The package layout's rules, read from the source: no import circles between modules (top
level or inside functions), and `jaxrl_sys` imports neither `agents` nor `envs`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jaxrl_sys", "envs", "agents")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules that `path` imports anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


def _graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    modules = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imports(p, modules) for p in paths}
    for name in graph:  # a package's __init__ is imported before any of its modules
        graph[name] = {m for m in graph[name] if m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle (as a path that returns to its start), or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == 1:
                return stack[stack.index(child):] + [child]
            if child not in state and (found := visit(child)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_no_import_circles_between_modules():
    graph = _graph()
    # a package imports its own modules from __init__; those modules importing the package
    # back for a name is the circle this test is for, so only module -> module edges count
    modules_only = {name: {m for m in edges if "." in m} for name, edges in graph.items()
                    if "." in name}
    assert _cycle(modules_only) == []


def test_jaxrl_sys_imports_neither_agents_nor_envs():
    graph = _graph()
    offending = {name: sorted(m for m in edges if m.split(".")[0] in ("agents", "envs"))
                 for name, edges in graph.items() if name.startswith("jaxrl_sys")}
    assert {k: v for k, v in offending.items() if v} == {}
