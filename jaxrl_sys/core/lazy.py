"""Names a package exports but imports on first use (PEP 562's module `__getattr__`), so that
importing the package, or one of its modules in a worker process, imports nothing heavy."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, names: Mapping[str, str],
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of a package that exports `names` lazily.

    Args:
        package: the package's `__name__`.
        names: each exported name -> the module that defines it, absolute
            (`"jaxrl_sys.api"`) or relative to the package (`".keys"`).

    Returns:
        (`__getattr__(name)`, which imports the defining module on first use, and
        `__dir__()`, the package's globals with the exported names), to assign at the
        package's top level.
    """
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(names[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
