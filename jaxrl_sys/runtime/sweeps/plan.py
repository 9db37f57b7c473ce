"""A sweep checked before anything is made: its settings, each validated as a config, their
compiled groups (settings whose static, untraced values are equal share a program), and what
sweeps, PBT and halving refuse, in one line each."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence, Union

from jaxrl_sys.core.config import field_types
from jaxrl_sys.runtime.loops import chunking
from jaxrl_sys.runtime.run_spec import ResolvedRun, RunSpec
from jaxrl_sys.runtime.sweeps.keys import SweepError, SweepKey, expand, parse_sweep_key
from jaxrl_sys.runtime.sweeps.population import Halving, Pbt, rung_ends
from jaxrl_sys.runtime.sweeps.results import describe_setting

SWEEP_BATCHINGS = ("auto", "vmap", "map")


@dataclasses.dataclass(frozen=True)
class Plan:
    """A checked sweep: its settings and their validated configs, grouped by compiled shape."""

    keys: tuple[SweepKey, ...]
    settings: tuple[dict, ...]
    configs: tuple[Any, ...]  # one validated config per setting
    float_keys: tuple[str, ...]  # swept float fields (traced unless the agent branches on them)


def plan_sweep(resolved: ResolvedRun) -> Plan:
    """Parse and check the spec's `--sweep` flags against the resolved config: unknown keys,
    wrong types, empty lists, bad ranges and invalid settings are one-line SweepErrors."""
    spec = resolved.spec
    keys = tuple(parse_sweep_key(text, resolved.config) for text in spec.sweep)
    names = [k.key for k in keys]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise SweepError(f"--sweep names {', '.join(repeated)} more than once")
    sampled = [k.key for k in keys if k.sampled]
    if sampled and spec.samples < 1:
        raise SweepError(f"--sweep {sampled[0]} is a range: give --samples K (K >= 1)")
    if spec.samples and not sampled:
        raise SweepError("--samples needs a range to sample (--sweep KEY=log:LO:HI)")
    fields = field_types(resolved.config)
    settings = expand(keys, spec.samples, spec.seed)
    for setting in settings:  # int fields sampled from a range are rounded
        for key, value in setting.items():
            if fields[key] is int and isinstance(value, float):
                setting[key] = int(round(value))
    configs = []
    for index, setting in enumerate(settings):
        try:
            config = dataclasses.replace(resolved.config, **setting)
            config.validate()
        except ValueError as error:
            raise SweepError(f"setting {index} ({describe_setting(setting)}): {error}") from None
        configs.append(config)
    float_keys = tuple(k.key for k in keys if fields[k.key] is float)
    return Plan(keys, tuple(settings), tuple(configs), float_keys)


@dataclasses.dataclass(frozen=True)
class Group:
    """Settings that share one compiled program: equal static values, traced floats."""

    index: int
    members: tuple[int, ...]  # setting indices
    config: Any  # the config of the first member (its traced values are replaced per row)
    traced: tuple[str, ...]  # keys passed as traced values


def group_settings(plan: Plan, traced: Sequence[str]) -> list[Group]:
    """Settings grouped by the values of their static (untraced) keys, in setting order."""
    static = [k.key for k in plan.keys if k.key not in traced]
    groups: dict[tuple, list[int]] = {}
    for index, setting in enumerate(plan.settings):
        groups.setdefault(tuple(setting[k] for k in static), []).append(index)
    return [Group(g, tuple(members), plan.configs[members[0]], tuple(traced))
            for g, members in enumerate(groups.values())]


def check_spec(spec: RunSpec, resolved: ResolvedRun) -> None:
    """What sweeps do not do, as one-line errors (before anything is created)."""
    if spec.sweep_batching not in SWEEP_BATCHINGS:
        raise SweepError(f"--sweep-batching must be one of {', '.join(SWEEP_BATCHINGS)}, got "
                         f"{spec.sweep_batching!r}")
    if resolved.host:
        raise SweepError("sweeps need a pure-JAX env; host-loop envs run one setting at a time")
    if spec.target_return is not None:
        raise SweepError("--target-return stops a run early; a sweep trains every setting to "
                         "the end (its table gives the steps to the threshold)")


def population_of(spec: RunSpec) -> Union[Pbt, Halving, None]:
    """The spec's population training, if any."""
    if spec.pbt:
        return Pbt(spec.pbt_interval, spec.pbt_quantile, spec.pbt_resample)
    if spec.halving:
        return Halving(spec.halving)
    return None


def check_population(population: Union[Pbt, Halving], spec: RunSpec, plan: Plan,
                     traced: Sequence[str], num_seeds: int, mapped: bool) -> None:
    """What PBT and halving need of a sweep, as one-line errors before anything is made:
    two settings or more in one compiled program (every key traced), an exploit step or a
    rung that fits in the run's chunks, and rows that divide over the devices at every rung."""
    flag = "--pbt" if isinstance(population, Pbt) else f"--halving {population.eta}"
    static = [k.key for k in plan.keys if k.key not in traced]
    if static:
        raise SweepError(f"{flag} trains its members side by side in one compiled program, "
                         f"so it changes traced float hyper-parameters only; {static[0]} changes "
                         "array shapes or the program")
    members = len(plan.settings)
    if members < 2:
        raise SweepError(f"{flag} needs a population of 2 settings or more, got {members}")
    _, num_chunks = chunking(plan.configs[0].num_iterations, spec.chunks)
    if isinstance(population, Pbt):
        if population.interval >= num_chunks:
            raise SweepError(f"--pbt-interval {population.interval} leaves no exploit step in "
                             f"{num_chunks} chunks (--chunks)")
        return
    ends = rung_ends(num_chunks, members, population.eta)
    if len(set(ends)) != len(ends):
        raise SweepError(f"{flag} over {members} settings needs at least "
                         f"{population.eta ** (len(ends) - 1)} chunks (--chunks), got {num_chunks}")
    count = members
    for _ in ends:
        if (count if mapped else count * num_seeds) % spec.devices:
            raise SweepError(f"{flag}: a rung of {count} settings x {num_seeds} seeds does "
                             f"not divide over {spec.devices} devices")
        count = -(-count // population.eta)
