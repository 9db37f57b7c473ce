"""What to sweep: the `--sweep` flags parsed into keys (a grid's values or a range to
sample) and expanded into settings, and the one-line error a sweep that cannot run raises."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Optional, Sequence

import numpy as np

from jaxrl_sys.core.config import ConfigError, field_types, parse_field_values
from jaxrl_sys.runtime.cli import UsageError

RANDOM_SCALES = ("log", "uniform")


class SweepError(UsageError):
    """A sweep that cannot run (bad keys or values, too large): one line, exit code 2."""


@dataclasses.dataclass(frozen=True)
class SweepKey:
    """One `--sweep` flag: a list of values (grid) or a range to sample (random search)."""

    key: str
    values: tuple = ()  # grid values, parsed by the field's type
    scale: Optional[str] = None  # "log" or "uniform" for a sampled range
    low: float = 0.0
    high: float = 0.0

    @property
    def sampled(self) -> bool:
        return self.scale is not None


def parse_sweep_key(text: str, config: Any) -> SweepKey:
    """`KEY=V1,V2,...`, `KEY=log:LO:HI` or `KEY=uniform:LO:HI` for a field of `config`."""
    key, sep, values = text.partition("=")
    key, values = key.strip(), values.strip()
    if not sep or not key:
        raise SweepError(f"--sweep {text}: expected KEY=V1,V2,... or KEY=log:LO:HI")
    try:
        fields = field_types(config)
        parse_field_values(config, key, (), "--sweep")  # an unknown key
    except ConfigError as error:
        raise SweepError(str(error)) from None
    kind = fields[key]
    head, _, rest = values.partition(":")
    if head in RANDOM_SCALES:
        if kind not in (float, int):
            raise SweepError(f"--sweep {text}: {head}: ranges need a number field; {key} is not")
        bounds = rest.split(":")
        try:
            low, high = (float(b) for b in bounds)
        except ValueError:
            raise SweepError(f"--sweep {text}: expected {head}:LO:HI with two numbers") from None
        if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
            raise SweepError(f"--sweep {text}: needs LO < HI, got {low:g} and {high:g}")
        if head == "log" and low <= 0:
            raise SweepError(f"--sweep {text}: log ranges need LO > 0")
        return SweepKey(key, scale=head, low=low, high=high)
    items = _split_values(values, kind)
    if not items:
        raise SweepError(f"--sweep {text}: the list of values is empty")
    try:
        return SweepKey(key, values=parse_field_values(config, key, items, "--sweep"))
    except ConfigError as error:
        raise SweepError(str(error)) from None


def _split_values(text: str, kind: Any) -> list[str]:
    """Values of a list: comma-separated, except for tuple fields (hidden sizes), whose values
    are separated by ';' or '/' (`--sweep hidden=64,64/128,128`)."""
    if getattr(kind, "__origin__", None) is tuple:
        return [v.strip() for v in text.replace(";", "/").split("/") if v.strip()]
    return [v.strip() for v in text.split(",") if v.strip()]


def expand(keys: Sequence[SweepKey], samples: int, seed: int = 0) -> list[dict[str, Any]]:
    """The settings of a sweep: every combination of the grid keys, each with `samples`
    draws of the sampled keys (seeded, so a resumed or repeated sweep draws the same)."""
    grid_keys = [k for k in keys if not k.sampled]
    random_keys = [k for k in keys if k.sampled]
    grid = [dict(zip([k.key for k in grid_keys], combo))
            for combo in itertools.product(*[k.values for k in grid_keys])]
    if not random_keys:
        return grid
    rng = np.random.default_rng(seed)
    settings = []
    for point in grid:
        for _ in range(samples):
            drawn = {}
            for k in random_keys:
                if k.scale == "log":
                    value = float(np.exp(rng.uniform(np.log(k.low), np.log(k.high))))
                else:
                    value = float(rng.uniform(k.low, k.high))
                drawn[k.key] = float(f"{value:.4g}")
            settings.append({**point, **drawn})
    return settings
