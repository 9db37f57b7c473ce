"""The API reference renders Google-style docstrings (mkdocs.yml: `docstring_style: google`):
every public function of `jaxrl_sys/core/`, of each agent's `losses.py` and of
`jaxrl_sys/agents/families/` names each of its parameters under `Args:` and, where it returns
something, says what under `Returns:`. The modules are parsed, not imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jaxrl_sys"
MODULES = sorted([*(PACKAGE / "core").glob("*.py"), *(PACKAGE / "agents").glob("*/losses.py"),
                  *(PACKAGE / "agents" / "families").glob("*.py")])
FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef)


def _public_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef]]:
    """(qualified name, node) of module-level functions and of methods of module-level classes
    whose names do not start with `_`."""
    found = [(node.name, node) for node in tree.body if isinstance(node, FUNCTION)]
    for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        found += [(f"{cls.name}.{node.name}", node) for node in cls.body
                  if isinstance(node, FUNCTION)]
    return [(name, node) for name, node in found if not node.name.startswith("_")]


def _parameters(function: ast.FunctionDef) -> list[str]:
    """Its parameters but self and cls, `*args` and `**kwargs` with their stars."""
    args = function.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [f"*{args.vararg.arg}"] if args.vararg else []
    names += [f"**{args.kwarg.arg}"] if args.kwarg else []
    return [name for name in names if name not in ("self", "cls")]


def _section(docstring: str, title: str) -> list[str] | None:
    """The lines of the `title:` section (up to the next line indented as little as the
    title), or None where there is none."""
    lines = docstring.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"{title}:"), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return body


def _documented_parameters(args_section: list[str]) -> set[str]:
    """The names the `Args:` entries give: `name: ...`, `name (type): ...`, `*args: ...`, or
    several together (`*args, **kwargs: ...`). Entries are the lines indented least."""
    entries = [line for line in args_section if line.strip()]
    if not entries:
        return set()
    indent = min(len(line) - len(line.lstrip()) for line in entries)
    names = set()
    for line in entries:
        match = re.match(r"([*\w][*\w, ]*?)\s*(\([^)]*\))?:", line[indent:])
        if match:
            names |= {name.strip() for name in match.group(1).split(",")}
    return names


def _returns_something(function: ast.FunctionDef) -> bool:
    """Annotated: unless the annotation is None. Unannotated: a `return <value>` in its own
    body (not in a nested function)."""
    if function.returns is not None:
        return not (isinstance(function.returns, ast.Constant) and function.returns.value is None)
    nodes = list(function.body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (*FUNCTION, ast.Lambda, ast.ClassDef)):
            nodes += ast.iter_child_nodes(node)
    return False


def _offenders() -> tuple[list[str], list[str]]:
    """`module:function` of functions missing parameters in `Args:` (with the names missing),
    and of functions that return something with no `Returns:`."""
    missing_args, missing_returns = [], []
    for path in MODULES:
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for name, function in _public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            docstring = ast.get_docstring(function) or ""
            parameters = _parameters(function)
            if parameters:
                args = _section(docstring, "Args")
                documented = _documented_parameters(args) if args is not None else set()
                absent = [p for p in parameters if p not in documented
                          and p.lstrip("*") not in documented]
                if absent:
                    missing_args.append(f"{module}:{name} ({', '.join(absent)})")
            if _returns_something(function) and _section(docstring, "Returns") is None:
                missing_returns.append(f"{module}:{name}")
    return missing_args, missing_returns


def test_the_modules_are_found():
    names = {path.relative_to(PACKAGE).as_posix() for path in MODULES}
    assert {"core/returns.py", "agents/dqn/losses.py",
            "agents/families/policy_gradient_losses.py"} <= names


def test_every_public_function_names_its_parameters_under_args():
    missing_args, _ = _offenders()
    assert missing_args == [], "no `Args:` entry for these parameters:\n" + "\n".join(missing_args)


def test_every_public_function_that_returns_something_has_a_returns_section():
    _, missing_returns = _offenders()
    assert missing_returns == [], "no `Returns:` section:\n" + "\n".join(missing_returns)
