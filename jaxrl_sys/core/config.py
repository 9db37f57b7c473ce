"""Typed `--set key=value` overrides for the agents' frozen dataclass configs.

Values are parsed by the field's type hint, so a typo or a wrong type is reported as one line
(`ConfigError`) before anything is compiled, and the CLI can print it and exit with status 2.
"""

from __future__ import annotations

import dataclasses
import decimal
import difflib
import fnmatch
import math
import types
import typing
from typing import Any, Literal, Mapping, Sequence, TypeVar, Union

T = TypeVar("T")

EnvValue = Union[int, float, bool, str]

_TRUE_WORDS = frozenset({"true", "1", "yes"})
_FALSE_WORDS = frozenset({"false", "0", "no"})
_ENV_PREFIX = "env."


class ConfigError(ValueError):
    """A bad configuration value; its message is one line, printed by the CLI as `error: <msg>`."""

    def __init__(self, message: str) -> None:
        """Store `message` with its line breaks joined into one line."""
        super().__init__(_one_line(message))


class _BadValue(Exception):
    """Internal: a value did not parse; the argument says what was expected."""


def _one_line(text: str) -> str:
    """Join the lines of `text` with spaces so a message always prints as a single line."""
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _split_pair(pair: str) -> tuple[str, str]:
    """Split `key=value` at the first '='; a missing '=' or empty key is a ConfigError."""
    key, sep, value = pair.partition("=")
    key = key.strip()
    if not sep:
        raise ConfigError(f"--set {pair}: expected key=value (missing '=')")
    if not key:
        raise ConfigError(f"--set {pair}: expected key=value (empty key)")
    return key, value.strip()


# --- scalar parsers -------------------------------------------------------------------------


def _parse_int(text: str) -> int:
    """Parse an integer; '1_000' and integral scientific notation such as '1e6' are accepted."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        raise _BadValue("an int") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise _BadValue("an int")
    return int(number)


def _parse_float(text: str) -> float:
    """Parse a finite float; ints are accepted, nan and inf are not."""
    try:
        number = float(text)
    except ValueError:
        raise _BadValue("a float") from None
    if not math.isfinite(number):
        raise _BadValue("a finite float")
    return number


def _parse_bool(text: str) -> bool:
    """Parse true/false/1/0/yes/no, case-insensitively."""
    word = text.lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise _BadValue("a bool (true/false/1/0/yes/no)")


_SCALAR_PARSERS = {int: _parse_int, float: _parse_float, bool: _parse_bool, str: str}
_TYPE_NAMES = {int: "int", float: "float", bool: "bool", str: "str"}


def _describe(tp: Any) -> str:
    """A short human name for a supported type, used in 'expected ...' messages."""
    return _TYPE_NAMES.get(tp, getattr(tp, "__name__", repr(tp)))


def _parse_value(text: str, tp: Any) -> Any:
    """Parse `text` as type `tp`; raises _BadValue naming what was expected."""
    if tp in _SCALAR_PARSERS:
        return _SCALAR_PARSERS[tp](text)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _parse_union(text, args)
    if origin is Literal:
        return _parse_literal(text, args)
    if origin is tuple:
        return _parse_tuple(text, args)
    if tp is Any:
        return text
    raise _BadValue(f"a value of a type --set cannot parse ({tp!r})")


def _parse_union(text: str, args: tuple[Any, ...]) -> Any:
    """Parse Optional[X] / X | None ('none' -> None) and unions tried in declaration order."""
    members = [a for a in args if a is not type(None)]
    if len(members) < len(args) and text.lower() == "none":
        return None
    expected = []
    for member in members:
        try:
            return _parse_value(text, member)
        except _BadValue as err:
            expected.append(str(err))
    if len(members) < len(args):
        expected.append("none")
    raise _BadValue(" or ".join(expected))


def _parse_literal(text: str, choices: tuple[Any, ...]) -> Any:
    """Return the Literal choice whose text form equals `text` (bools also accept bool words)."""
    for choice in choices:
        if isinstance(choice, bool):
            try:
                if _parse_bool(text) is choice:
                    return choice
            except _BadValue:
                continue
        elif isinstance(choice, (int, float)):
            try:
                if _parse_float(text) == choice:
                    return choice
            except _BadValue:
                continue
        elif str(choice) == text:
            return choice
    raise _BadValue("one of " + ", ".join(repr(c) for c in choices))


def _parse_tuple(text: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Parse a comma-separated tuple: tuple[X, ...] of any length or a fixed tuple[X, Y]."""
    items = [] if text in ("", "()") else [s.strip() for s in text.strip("()").split(",")]
    if len(args) == 2 and args[1] is Ellipsis:
        kind = args[0]
        try:
            return tuple(_parse_value(item, kind) for item in items)
        except _BadValue:
            raise _BadValue(f"comma-separated {_describe(kind)}s, e.g. 64,64") from None
    if not args:  # bare `tuple`: keep the strings
        return tuple(items)
    names = ",".join(_describe(a) for a in args)
    if len(items) != len(args):
        raise _BadValue(f"{len(args)} comma-separated values ({names})")
    try:
        return tuple(_parse_value(item, kind) for item, kind in zip(items, args))
    except _BadValue:
        raise _BadValue(f"{len(args)} comma-separated values ({names})") from None


# --- public API ------------------------------------------------------------------------------


def _settable_fields(config: Any) -> dict[str, Any]:
    """Map each init-able field name of the dataclass instance to its resolved type hint."""
    cls = type(config)
    try:
        hints = typing.get_type_hints(cls)
    except Exception as err:  # an annotation that cannot be resolved is a bug in the agent
        raise TypeError(f"cannot resolve type hints of {cls.__qualname__}: {err}") from err
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def _unknown_key_message(pair: str, key: str, config: Any, keys: list[str]) -> str:
    """Message for an unknown key: the closest valid keys, or all keys when none is close."""
    owner = f"{type(config).__module__.rsplit('.', 1)[-1]}.{type(config).__qualname__}"
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.6)
    if close:
        return f"--set {pair}: unknown key '{key}' for {owner}; did you mean: {', '.join(close)}?"
    return f"--set {pair}: unknown key '{key}' for {owner}; valid keys: {', '.join(sorted(keys))}"


def field_types(config: Any) -> dict[str, Any]:
    """Each settable field of the dataclass instance `config` and its type hint.

    Args:
        config: a dataclass instance (an agent's Config).

    Returns:
        Field name -> resolved type hint, for every field `__init__` takes.
    """
    return _settable_fields(config)


def parse_field_values(config: Any, key: str, texts: Sequence[str], flag: str) -> tuple:
    """`texts` parsed as values of field `key` of `config`; an unknown key or a value of the
    wrong type is a ConfigError naming `flag` (e.g. `--sweep key=...`).

    Args:
        config: the dataclass instance whose field types parse the values.
        key: the field's name.
        texts: the values as text.
        flag: the flag that errors name, e.g. `--sweep`.

    Returns:
        The parsed values, one per text, in order.
    """
    fields = _settable_fields(config)
    if key not in fields:
        message = _unknown_key_message(f"{key}=...", key, config, list(fields))
        raise ConfigError(message.replace("--set", flag, 1))
    try:
        return tuple(_parse_value(text, fields[key]) for text in texts)
    except _BadValue as err:
        raise ConfigError(f"{flag} {key}=...: expected values that are {err}") from None


# names fields had before every agent used the same name for the same quantity; `--set` and
# the overrides saved with older runs still accept them
RENAMED_FIELDS = {"num_steps": "rollout_steps", "discount": "gamma"}


def apply_overrides(config: T, pairs: Sequence[str]) -> T:
    """Return a copy of the frozen dataclass `config` with `key=value` pairs applied and validated.

    Values are parsed by each field's type hint; later pairs win over earlier ones for the same key.

    Args:
        config: a frozen dataclass instance.
        pairs: `key=value` texts; a key may be a field's old name (`RENAMED_FIELDS`).

    Returns:
        The new config, its `validate()` run where it has one.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"apply_overrides needs a dataclass instance, got {type(config).__name__}")
    fields = _settable_fields(config)
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, text = _split_pair(pair)
        if key not in fields and RENAMED_FIELDS.get(key) in fields:
            key = RENAMED_FIELDS[key]
        if key not in fields:
            raise ConfigError(_unknown_key_message(pair, key, config, list(fields)))
        try:
            changes[key] = _parse_value(text, fields[key])
        except _BadValue as err:
            raise ConfigError(f"--set {pair}: expected {err}") from None
    try:
        new = dataclasses.replace(config, **changes)
        validate = getattr(new, "validate", None)
        if callable(validate):
            validate()
    except ConfigError:
        raise
    except ValueError as err:
        raise ConfigError(f"invalid {type(config).__qualname__}: {err}") from err
    return new


def _parse_env_value(text: str) -> EnvValue:
    """Parse an env kwarg literally: int, then float, then a bool word, else the string itself."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    word = text.lower()
    if word in ("true", "yes"):
        return True
    if word in ("false", "no"):
        return False
    return text


def split_env_overrides(pairs: Sequence[str]) -> tuple[list[str], dict[str, EnvValue]]:
    """Separate `env.<name>=value` pairs (returned as env kwargs) from the agent's own pairs.

    Pairs not starting with 'env.' are returned unchanged, in order, for `apply_overrides`.

    Args:
        pairs: `key=value` texts.

    Returns:
        agent_pairs: the pairs that do not start with `env.`, in order.
        env_kwargs: env argument name -> value (int, float, bool, else the text).
    """
    rest: list[str] = []
    env_kwargs: dict[str, EnvValue] = {}
    for pair in pairs:
        if not pair.strip().startswith(_ENV_PREFIX):
            rest.append(pair)
            continue
        key, text = _split_pair(pair)
        name = key[len(_ENV_PREFIX):].strip()
        if not name.isidentifier():
            raise ConfigError(f"--set {pair}: '{name}' is not a valid env argument name")
        env_kwargs[name] = _parse_env_value(text)
    return rest, env_kwargs


def _jsonable(value: Any) -> Any:
    """Recursively turn tuples into lists (and nested containers into JSON-ready ones)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def config_to_dict(config: Any) -> dict[str, Any]:
    """Return the dataclass `config` as a JSON-serialisable dict, for the run's config file.

    Args:
        config: a dataclass instance.

    Returns:
        Field name -> value, tuples as lists (nested containers JSON-ready).
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"config_to_dict needs a dataclass instance, got {type(config).__name__}")
    return _jsonable(dataclasses.asdict(config))


def _tupled(value: Any) -> Any:
    """Recursively turn JSON lists back into tuples (configs hold tuples: hashable, frozen)."""
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def config_from_dict(base: T, saved: dict[str, Any]) -> T:
    """`base` with the fields of a saved config (`config_to_dict`) put back.

    A saved run keeps the config it was started with, whatever the defaults are today.
    Fields that are no longer settable are ignored, old names are renamed, and fields
    added since keep `base`'s value (the agent's class default: new features are off there).

    Args:
        base: the config whose values the fields not in `saved` keep.
        saved: field name -> value, as `config_to_dict` wrote it (lists become tuples).

    Returns:
        `base` with the saved fields put back.
    """
    fields = _settable_fields(base)
    changes = {}
    for key, value in saved.items():
        key = key if key in fields else RENAMED_FIELDS.get(key, key)
        if key in fields:
            changes[key] = _tupled(value)
    return dataclasses.replace(base, **changes)


def _concrete(value: Any) -> bool:
    """Whether `value` is a plain number that can be checked here. A sweep's traced
    hyper-parameters are not: every setting was validated as numbers before tracing."""
    return isinstance(value, (int, float))


def check_at_least(config: Any, minimum: float, *names: str) -> None:
    """ConfigError naming the first field in `names` that is below `minimum`.

    Args:
        config: a dataclass instance; traced (non-number) values are not checked.
        minimum: the lowest value allowed.
        *names: the fields to check, in order.
    """
    for name in names:
        if _concrete(getattr(config, name)) and not getattr(config, name) >= minimum:
            raise ConfigError(f"{name} must be >= {minimum:g}, got {getattr(config, name)}")


def check_positive(config: Any, *names: str) -> None:
    """ConfigError naming the first field in `names` that is not > 0.

    Args:
        config: a dataclass instance; traced (non-number) values are not checked.
        *names: the fields to check, in order.
    """
    for name in names:
        if _concrete(getattr(config, name)) and not getattr(config, name) > 0:
            raise ConfigError(f"{name} must be > 0, got {getattr(config, name)}")


def check_unit_interval(config: Any, *names: str) -> None:
    """ConfigError naming the first field in `names` outside [0, 1].

    Args:
        config: a dataclass instance; traced (non-number) values are not checked.
        *names: the fields to check, in order.
    """
    for name in names:
        if _concrete(getattr(config, name)) and not 0.0 <= getattr(config, name) <= 1.0:
            raise ConfigError(f"{name} must be in [0, 1], got {getattr(config, name)}")


def check_open_unit_interval(config: Any, *names: str) -> None:
    """ConfigError naming the first field in `names` outside (0, 1).

    Args:
        config: a dataclass instance; traced (non-number) values are not checked.
        *names: the fields to check, in order.
    """
    for name in names:
        if _concrete(getattr(config, name)) and not 0.0 < getattr(config, name) < 1.0:
            raise ConfigError(f"{name} must be in (0, 1), got {getattr(config, name)}")


def check_choice(config: Any, name: str, choices: Any) -> None:
    """ConfigError if field `name` is not one of `choices`.

    Args:
        config: a dataclass instance.
        name: the field to check.
        choices: the values allowed (a set or sequence).
    """
    if getattr(config, name) not in choices:
        raise ConfigError(f"{name} must be one of {sorted(choices)}, got {getattr(config, name)!r}")


def check_layer_widths(config: Any, name: str) -> None:
    """ConfigError unless field `name` is a non-empty tuple of positive layer widths.

    Args:
        config: a dataclass instance.
        name: the field to check, a tuple of ints.
    """
    widths = getattr(config, name)
    if not widths or min(widths) < 1:
        raise ConfigError(f"{name} must be positive layer widths, got {widths}")


MAX_ITERATIONS = 2**31 - 1  # iteration counters are int32 on device


def check_budget(config: Any) -> None:
    """ConfigError if `total_steps` needs more iterations than the int32 counters hold.

    Args:
        config: a config with `total_steps` and `steps_per_iteration`.
    """
    needed = iterations(config.total_steps, config.steps_per_iteration)
    if needed > MAX_ITERATIONS:
        raise ConfigError(
            f"total_steps={config.total_steps:g} is too large: at most "
            f"{MAX_ITERATIONS * config.steps_per_iteration:,} env steps with "
            f"{config.steps_per_iteration} per iteration")


def iterations(total_steps: int, steps_per_iteration: int) -> int:
    """Training iterations needed to take at least `total_steps` env steps (at least one).

    Args:
        total_steps: env steps the run must take.
        steps_per_iteration: env steps one iteration takes.

    Returns:
        ceil(total_steps / steps_per_iteration), at least 1.
    """
    return max(1, -(-total_steps // steps_per_iteration))


class RolloutBudget:
    """Iteration counts of an agent config with `total_steps`, `num_envs` and `rollout_steps`
    (a mixin of every agent's Config: one iteration steps every env `rollout_steps` times)."""

    total_steps: int
    num_envs: int
    rollout_steps: int

    @property
    def steps_per_iteration(self) -> int:
        """Env steps one iteration takes: every env steps `rollout_steps` times.

        Returns:
            `num_envs * rollout_steps`.
        """
        return self.num_envs * self.rollout_steps

    @property
    def num_iterations(self) -> int:
        """Iterations that take at least `total_steps` env steps (`iterations`).

        Returns:
            The number of iterations, at least 1.
        """
        return iterations(self.total_steps, self.steps_per_iteration)


NOT_MEASURED = "not measured"  # how a `Tuned.reached` without a figure begins


@dataclasses.dataclass(frozen=True)
class Tuned:
    """One entry of an agent's shipped per-env defaults (its `defaults.py`): the config fields
    that `env` (an env id, or a `*` pattern for a family such as `"brax:*"`) sets, and one line
    of what they reached and where that figure is recorded."""

    env: str
    overrides: Mapping[str, Any]
    reached: str = ""

    @property
    def measured(self) -> bool:
        """Whether `reached` records a measured figure: a family default that sizes a run
        without having been measured says so, starting with "not measured".

        Returns:
            True where `reached` holds a measured figure.
        """
        return bool(self.reached) and not self.reached.startswith(NOT_MEASURED)


def tuned_config(config: T, entries: Sequence[Tuned], env_name: str) -> T:
    """`config` with the overrides of the entry for `env_name` (see `env_defaults`).

    Args:
        config: the agent's Config (its class defaults).
        entries: the agent's shipped `Tuned` entries, at most one per `env`.
        env_name: the env id of the run.

    Returns:
        `config` with the overrides of the entry that applies, or unchanged where none does.
    """
    per_env: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.env in per_env:
            raise ValueError(f"two tuned entries for {entry.env!r}")
        per_env[entry.env] = dict(entry.overrides)
    return env_defaults(config, per_env, env_name)


def env_defaults(config: T, per_env: dict[str, dict[str, Any]], env_name: str) -> T:
    """`config` with the overrides `per_env` lists for `env_name`: its own entry, else the
    entry of its family, the longest `*` pattern it matches (`"brax:*"` for `brax:hopper`,
    `"envpool:*-v5"` for `envpool:Breakout-v5`), else none.

    Args:
        config: the agent's Config (its class defaults).
        per_env: env id or `*` pattern -> field name -> value.
        env_name: the env id of the run.

    Returns:
        `config` with the overrides of the entry that applies, or unchanged where none does.
    """
    if env_name in per_env:
        return dataclasses.replace(config, **per_env[env_name])
    families = [key for key in per_env if "*" in key and fnmatch.fnmatchcase(env_name, key)]
    overrides = per_env[max(families, key=len)] if families else {}
    return dataclasses.replace(config, **overrides)
