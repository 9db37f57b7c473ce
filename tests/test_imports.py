"""The package layout's rules, read from the source: one top-level package, no import circles
between modules (top level or inside functions), and imports that follow the layers:

    core      imports nothing of ours but core
    envs      core, envs
    datasets  core, datasets        (recording, Minari's format, transitions)
    agents    core, datasets, agents: an agent its own package and the families
              (jaxrl_sys.agents.families), never another agent; families core and families
    runtime   core, runtime         (the caller hands agents and envs in)
    tools     core, datasets, runtime, tools
    serve     core, runtime, serve  (the caller hands agents and envs in)
    commands  anything (the entry points wire agents and envs into the run machinery);
              so do jaxrl_sys.api (`run` and `sweep` with this package's agents and envs)
              and jaxrl_sys.client (the policy client, rebuilding policies with them)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jaxrl_sys",)
LAYERS = {
    "core": {"core"},
    "envs": {"core", "envs"},
    "datasets": {"core", "datasets"},
    "agents": {"core", "datasets", "agents"},
    "runtime": {"core", "runtime"},
    "tools": {"core", "datasets", "runtime", "tools"},
    "serve": {"core", "runtime", "serve"},
}


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
    packages = {_module_name(p) for p in (ROOT / "jaxrl_sys").rglob("__init__.py")}
    modules_only = {name: {m for m in edges if m not in packages} for name, edges in graph.items()
                    if name not in packages}
    assert _cycle(modules_only) == []


# the lazy facade, the Python API over the layers and the policy client with this package's
# agents and envs
TOP_LEVEL = {"jaxrl_sys", "jaxrl_sys.api", "jaxrl_sys.client"}


def _layer(module: str) -> str:
    """`jaxrl_sys.core.types` -> "core"; the top-level package itself -> ""."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_sits_in_a_layer_folder():
    graph = _graph()
    loose = sorted(name for name in graph
                   if name not in TOP_LEVEL and _layer(name) not in {*LAYERS, "commands"})
    assert loose == []


def test_imports_follow_the_layers():
    graph = _graph()
    offending = {}
    for name, edges in graph.items():
        allowed = LAYERS.get(_layer(name))
        if allowed is None:  # commands, the Python API and the package's lazy facade
            continue
        wrong = sorted(m for m in edges if m != "jaxrl_sys" and _layer(m) not in allowed)
        if wrong:
            offending[name] = wrong
    assert offending == {}


def _agent_package(module: str) -> str:
    """`jaxrl_sys.agents.ppo.agent` -> "ppo"; the registry (`jaxrl_sys.agents`) -> ""."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "agents" else ""


def test_no_agent_imports_another_agent():
    """What agents share lives in the families (`jaxrl_sys.agents.families`), which import
    core and themselves only: an agent imports core, the families and its own package."""
    offending = {}
    for name, edges in _graph().items():
        own = _agent_package(name)
        if not own:
            continue
        allowed = {own, "families"} if own != "families" else {"families"}
        wrong = sorted(m for m in edges if _layer(m) == "agents" and _agent_package(m) not in allowed)
        if wrong:
            offending[name] = wrong
    assert offending == {}


TOP_OF_MODULE = ("runtime", "tools")  # layers whose imports sit at the top of their modules


def test_imports_inside_functions_say_why():
    """In runtime and tools, an import inside a function is lazy for a reason its line gives
    (an optional extra, start-up time, JAX not yet imported); any other sits at the top, so
    the import graph is what the module heads say."""
    unexplained = []
    for layer in TOP_OF_MODULE:
        for path in sorted((ROOT / "jaxrl_sys" / layer).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            for function in ast.walk(ast.parse(source)):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) \
                            and "#" not in lines[node.lineno - 1]:
                        unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert sorted(set(unexplained)) == []


def test_one_top_level_package_is_installed():
    """pyproject.toml installs jaxrl_sys and its subpackages, nothing beside them."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    find = project["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["jaxrl_sys", "jaxrl_sys.*"]
    tops = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file())
    assert tops == ["jaxrl_sys"]
