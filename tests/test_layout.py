"""The agents' shape, read from the source: each agent is a package of small, named parts
(agent.py binds, losses.py holds the maths, defaults.py the tuned configs as data), no function
in it is longer than about 120 lines, and code comments hold no history of experiments."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from jaxrl_sys import agents
from jaxrl_sys.core.types import HostAgentDef

ROOT = Path(__file__).resolve().parent.parent
AGENTS_DIR = ROOT / "jaxrl_sys" / "agents"
MAX_FUNCTION_LINES = 120
HISTORY = re.compile(r"#.*\b(issue \d+|tried|we tried|used to|earlier default)", re.IGNORECASE)


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, line count) of every function in `path`, nested ones included."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child.end_lineno - child.lineno + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def _package(name: str) -> Path:
    """The folder of the package agent `name` lives in (a variant shares its agent's)."""
    return AGENTS_DIR / agents.package_of(name).rsplit(".", 1)[1]


SHAPE = ("__init__.py", "config.py", "agent.py", "losses.py", "networks.py", "defaults.py")


@pytest.mark.parametrize("name", agents.names())
def test_every_agent_package_has_the_same_shape(name):
    """config, agent (binds), losses (the maths), networks, defaults (tuned configs as data),
    and host.py exactly where the agent has the host loop's functions (`HostAgentDef`)."""
    package = _package(name)
    missing = [part for part in SHAPE if not (package / part).is_file()]
    assert missing == [], f"{name}: no {', '.join(missing)}"
    has_host_module = (package / "host.py").is_file()
    assert has_host_module == isinstance(agents.load(name), HostAgentDef), name
    if has_host_module:
        defined = {node.name for node in ast.parse((package / "host.py").read_text()).body
                   if isinstance(node, ast.FunctionDef)}
        assert "host_fns" in defined, f"{name}: host_fns is not in host.py"


def test_the_families_hold_what_agents_share():
    families = AGENTS_DIR / "families"
    for module in ("policy_gradient.py", "policy_gradient_losses.py", "actor_critic.py",
                   "q_learning.py", "teams.py"):
        assert (families / module).is_file(), module
    assert not (families / "agent.py").exists()  # a family is no agent of its own


@pytest.mark.parametrize("name", agents.names())
def test_no_function_of_an_agent_is_longer_than_the_limit(name):
    long = {f"{path.name}:{fn}": lines for path in sorted(_package(name).glob("*.py"))
            for fn, lines in _functions(path) if lines > MAX_FUNCTION_LINES}
    assert long == {}


@pytest.mark.parametrize("name", agents.names())
def test_agent_code_holds_no_history_of_experiments(name):
    lines = [f"{path.name}:{i}: {line.strip()}" for path in sorted(_package(name).glob("*.py"))
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if HISTORY.search(line)]
    assert lines == []


def test_the_function_counter_sees_nested_functions(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def outer():\n    def inner():\n        return 1\n    return inner\n")
    assert _functions(source) == [("outer", 4), ("outer.inner", 2)]
