"""Env parameters checked before an env is built: each name against those the env takes (its
constructor's arguments, its EnvParams fields), each value against its declared type and an
obvious range (step bounds, sizes and counts > 0, probabilities in [0, 1], masses > 0). Every
problem is one `EnvParamError` line, which the commands print with exit code 2.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import types
import typing
from typing import Any, Callable, Literal, Union

import numpy as np

from jaxrl_sys.envs.errors import EnvParamError

_EMPTY = inspect.Parameter.empty
_NONE_WORDS = ("none", "None")


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter an env takes: its type hint (`_EMPTY` if none) and default (`_EMPTY`)."""

    name: str
    hint: Any = _EMPTY
    default: Any = _EMPTY


# (name pattern, test, what it asks): the first pattern that matches a parameter's whole name
# decides. Counts of steps, cells and items and physical sizes are positive; "n_*"/"num_*"
# counts of extras may be 0; probabilities and rates are fractions.
_RANGES: tuple[tuple[str, Callable[[float], bool], str], ...] = (
    (r"prob|.*_prob|.*probability|success_rate", lambda x: 0.0 <= x <= 1.0, "in [0, 1]"),
    (r"max_steps.*|.*episode_length|.*length.*|.*size|rows|columns|.*width|.*height"
     r"|num_bits|num_actions|n_actions|num_joints|t_max|.*_interval|max_oxygen"
     r"|.*mass.*|.*_moi|tau|dt|m|l|.*radius|sigma_.*|force_mag|torque_scale"
     r"|max_(speed|torque|force|vel_\d+)", lambda x: x > 0, "> 0"),
    (r"n_.*|num_.*|.*cool_down|.*_noise.*", lambda x: x >= 0, ">= 0"),
)


def signature_params(fn: Callable[..., Any]) -> tuple[dict[str, Param], bool]:
    """The keyword-settable parameters of `fn` (a function or a class, whose `__init__` is
    read), and whether it also takes any other keyword (`**kwargs`)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a readable signature
        return {}, True
    hints = _hints(fn.__init__ if isinstance(fn, type) else fn)
    params, var_keyword = {}, False
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
            params[p.name] = Param(p.name, hints.get(p.name, _EMPTY), p.default)
    return params, var_keyword


def field_params(instance: Any) -> dict[str, Param]:
    """The fields of the dataclass `instance` (a gymnax EnvParams), their current values as
    defaults."""
    hints = _hints(type(instance))
    return {f.name: Param(f.name, hints.get(f.name, _EMPTY), getattr(instance, f.name))
            for f in dataclasses.fields(instance) if f.init}


def check_names(env: str, given: dict[str, Any], known: dict[str, Param]) -> None:
    """One-line EnvParamError naming the params in `given` that `env` does not take."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        listed = ", ".join(known) if known else "(none)"
        raise EnvParamError(f"unknown param(s) {', '.join(unknown)} for env {env!r}; "
                            f"valid: {listed}")


def check_required(env: str, given: dict[str, Any], known: dict[str, Param]) -> None:
    """One-line EnvParamError naming the params without a default that `given` lacks."""
    missing = [name for name, p in known.items() if p.default is _EMPTY and name not in given]
    if missing:
        raise EnvParamError(f"env {env!r} needs param(s) {', '.join(missing)}: "
                            + " ".join(f"--set env.{name}=..." for name in missing))


def check_values(env: str, given: dict[str, Any], known: dict[str, Param]) -> dict[str, Any]:
    """`given` with each value of a known param checked against its type and range and cast
    to it (an integral 20.0 for an int field is 20, 1 for a bool field is True); values of
    params not in `known` pass unchecked."""
    checked = {}
    for name, value in given.items():
        param = known.get(name)
        if param is not None:
            value = _typed(env, param, value)
            _check_range(env, name, value)
        checked[name] = value
    return checked


def call_checked(env: str, factory: Callable[..., Any], given: dict[str, Any]) -> Any:
    """`factory(**given)` with the names and values of `given` checked against its signature
    first (any name passes where it takes `**kwargs`)."""
    known, var_keyword = signature_params(factory)
    if not var_keyword:
        check_names(env, given, known)
    check_required(env, given, known)
    return factory(**check_values(env, given, known))


def _hints(target: Any) -> dict[str, Any]:
    """`target`'s resolved type hints, or none where they do not resolve (a user's module)."""
    try:
        return typing.get_type_hints(target)
    except Exception:  # hints naming what the module does not import: fall back to defaults
        return {}


def _declared(param: Param) -> Any:
    """The type a param asks for: its hint, else its default's type (a plain scalar's)."""
    if param.hint is not _EMPTY and param.hint is not Any:
        return param.hint
    default = param.default
    if isinstance(default, (bool, int, float, str)):
        return type(default)
    if hasattr(default, "shape") and hasattr(default, "dtype"):
        return type(default)
    return _EMPTY


def _typed(env: str, param: Param, value: Any) -> Any:
    """`value` cast to what `param` declares, or a one-line EnvParamError saying what it asks."""
    try:
        return _cast(value, _declared(param), param.default)
    except _Mismatch as problem:
        raise EnvParamError(f"env.{param.name}={_shown(value)} for env {env!r}: expected "
                            f"{problem}") from None


class _Mismatch(Exception):
    """Internal: a value is not of the declared type; the argument says what was expected."""


def _cast(value: Any, tp: Any, default: Any) -> Any:
    """`value` as type `tp` (see `_typed`); raises `_Mismatch` naming what was expected."""
    if tp is _EMPTY or _is_traced(value):
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _cast_union(value, args, default)
    if origin is Literal:
        if value in args:
            return value
        raise _Mismatch("one of " + ", ".join(repr(a) for a in args))
    if tp is bool:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if _is_int(value) and int(value) in (0, 1):
            return bool(value)
        raise _Mismatch("true or false")
    if tp is int:
        if _is_int(value):
            return int(value)
        if _is_float(value) and math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise _Mismatch("an int")
    if tp is float:
        if (_is_int(value) or _is_float(value)) and math.isfinite(float(value)):
            return float(value)
        raise _Mismatch("a finite float")
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch("a string")
    if _is_array_type(tp) or (hasattr(default, "shape") and np.ndim(default) > 0):
        return _cast_array(value, default)
    return value  # a type --set does not describe (a list, a user's class): as given


def _cast_union(value: Any, args: tuple[Any, ...], default: Any) -> Any:
    """`value` as the first member of a union it fits ('none' is None for an Optional)."""
    members = [a for a in args if a is not type(None)]
    if len(members) < len(args) and (value is None or value in _NONE_WORDS):
        return None
    wanted = []
    for member in members:
        try:
            return _cast(value, member, default)
        except _Mismatch as problem:
            wanted.append(str(problem))
    if len(members) < len(args):
        wanted.append("none")
    raise _Mismatch(" or ".join(wanted))


def _cast_array(value: Any, default: Any) -> Any:
    """An array param takes an array of its default's shape; a scalar would be broadcast."""
    shape = np.shape(default) if default is not _EMPTY and default is not None else None
    if isinstance(value, (str, bool)) or not hasattr(value, "__len__") and np.ndim(value) == 0:
        raise _Mismatch(f"an array{f' of shape {shape}' if shape else ''} (set it from Python)")
    if shape is not None and np.shape(value) != shape:
        raise _Mismatch(f"an array of shape {shape}")
    return value


def _is_array_type(tp: Any) -> bool:
    """Whether the hint `tp` names an array type (jax.Array, np.ndarray)."""
    return isinstance(tp, type) and tp.__name__ in ("Array", "ArrayImpl", "ndarray")


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_float(value: Any) -> bool:
    return isinstance(value, (float, np.floating))


def _is_traced(value: Any) -> bool:
    """A traced value (a sweep's env setting inside a compiled program) cannot be checked."""
    try:
        import jax
    except ImportError:
        return False
    return isinstance(value, jax.core.Tracer)


def _check_range(env: str, name: str, value: Any) -> None:
    """One-line EnvParamError if a number is outside the range its name implies (`_RANGES`)."""
    if not (_is_int(value) or _is_float(value)):
        return
    for pattern, ok, wanted in _RANGES:
        if re.fullmatch(pattern, name):
            if not ok(float(value)):
                raise EnvParamError(f"env.{name}={_shown(value)} for env {env!r}: must be "
                                    f"{wanted}")
            return


def _shown(value: Any) -> str:
    """A value as the user wrote it, short."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."
