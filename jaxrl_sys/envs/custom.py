"""A user's own JAX env named by where it lives: `--env my_pkg.envs:MyEnv`, imported on first use.

The name may point at a gymnax `Environment` class (its constructor arguments and its
EnvParams fields are the env params), a gymnax env already made (its EnvParams fields), a
factory returning one of our envs (an object with `spec`, `reset` and `step`; its arguments are
the env params) or a gymnax env, or one of our envs itself. A module that does not import and a
name the module lacks are one line each (`UnknownEnvError`), as are params the env does not
take (`EnvParamError`).
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
from typing import Any

from jaxrl_sys.core.types import Env
from jaxrl_sys.envs import gymnax_env, params as env_params
from jaxrl_sys.envs.errors import UnknownEnvError, UnsupportedEnvError

_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_GYMNAX_METHODS = ("default_params", "reset_env", "step_env", "observation_space",
                   "action_space")


def is_import_path(name: str) -> bool:
    """Whether `name` reads as `module.path:attr` (a user's env to import)."""
    return _IMPORT_PATH.fullmatch(name) is not None


def make(name: str, params: dict[str, Any]) -> Env:
    """The env `name` points at, made with `params` (see the module docstring); not yet
    wrapped in EpisodeStatistics."""
    return _bounded(name, _made(name, load(name), params))


def _made(name: str, target: Any, params: dict[str, Any]) -> Env:
    """Our env from what `name` points at (`target`), made with `params`."""
    if isinstance(target, type) and _is_gymnax(target):
        return gymnax_env.build(name, target, target, params)
    if _is_gymnax(target):
        return gymnax_env.build(name, None, lambda: target, params)
    if _is_ours(target):
        env_params.check_names(name, params, {})
        return target
    if not callable(target):
        raise UnsupportedEnvError(
            f"env {name!r} is of type {type(target).__name__}, not an env (a gymnax Environment "
            "class or instance, a factory, or an object with spec, reset and step)")
    made = env_params.call_checked(name, target, params)
    if isinstance(made, tuple) and len(made) == 2 and _is_gymnax(made[0]):
        return gymnax_env.GymnaxEnv(made[0], made[1], name=name)  # gymnax.make's pair
    if _is_gymnax(made):
        return gymnax_env.build(name, None, lambda: made, {})
    if _is_ours(made):
        return made
    raise UnsupportedEnvError(f"env {name!r}: the factory returned an object of type "
                              f"{type(made).__name__}, not an env (a gymnax Environment, or an object with spec, "
                              "reset and step)")


def load(name: str) -> Any:
    """The object `module:attr` names, the module imported on first use (from the working
    directory too, as `python -m` would, where it is not on the path)."""
    module_name, _, attr = name.partition(":")
    module = _import(name, module_name)
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            public = [n for n in dir(target) if not n.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3)
            hint = f"; closest: {', '.join(close)}" if close else ""
            raise UnknownEnvError(f"env {name!r}: {module_name} has no {attr!r}{hint}")
        target = getattr(target, part)
    return target


def _import(name: str, module_name: str) -> Any:
    """`module_name` imported; one line if it (or a module it imports) is missing. Where the
    module itself is not found and the working directory is not on the path, it is looked
    for there too."""
    here = os.getcwd()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if not (module_name == missing or module_name.startswith(missing + ".")) \
                or "" in sys.path or here in sys.path:
            raise _import_error(name, module_name, error) from None
    except ImportError as error:
        raise _import_error(name, module_name, error) from None
    sys.path.insert(0, here)
    importlib.invalidate_caches()
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        sys.path.remove(here)
        raise _import_error(name, module_name, error) from None
    except Exception:
        sys.path.remove(here)
        raise


def _import_error(name: str, module_name: str, error: ImportError) -> UnknownEnvError:
    """The one line for a module that does not import; where a package of the path was found
    elsewhere (another `tests` package installed), it says where."""
    parts = module_name.split(".")
    found = [sys.modules.get(".".join(parts[:i])) for i in range(len(parts) - 1, 0, -1)]
    where = next((m for m in found if m is not None), None)
    elsewhere = (f"; {where.__name__} is the package in {os.path.dirname(where.__file__)}"
                 if where is not None and getattr(where, "__file__", None) else "")
    return UnknownEnvError(f"env {name!r}: cannot import {module_name} "
                           f"({_one_line(error)}{elsewhere})")


def _is_gymnax(obj: Any) -> bool:
    """Whether `obj` (a class or an instance) has a gymnax Environment's methods."""
    return all(hasattr(obj, method) for method in _GYMNAX_METHODS)


def _is_ours(obj: Any) -> bool:
    """Whether `obj` is an env of ours: an instance with `spec`, `reset` and `step`."""
    return not isinstance(obj, type) and all(hasattr(obj, a) for a in ("spec", "reset", "step"))


def _bounded(name: str, env: Any) -> Any:
    """`env` if its spec bounds episodes (a greedy evaluation runs that many steps)."""
    steps = getattr(env.spec, "max_episode_steps", None)
    if not isinstance(steps, int) or steps < 1:
        raise UnsupportedEnvError(f"env {name!r}: spec.max_episode_steps must be an int >= 1 "
                                  f"(the episode bound), got {steps!r}")
    return env


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
