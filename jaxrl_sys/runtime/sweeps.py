"""Hyper-parameter sweeps compiled into one program: settings x seeds as one vmapped axis.

    python scripts/train.py --agent ppo --seeds 4 \\
        --sweep learning_rate=1e-3,2.5e-3 --sweep ent_coef=0,0.01      # a grid: 4 settings
    python scripts/train.py --agent ppo --sweep learning_rate=log:1e-4:1e-2 --samples 8

Every (setting, seed) pair is a row of one compiled program (`execution.place_rows`), and the
rows are split over `--devices`. A float hyper-parameter reaches the agent as a traced value
of its own config object, so the learning code is the one a single run uses. A key that
changes array shapes or the program (hidden sizes, num_envs, flags, ints) splits the sweep
into compiled groups, run one after another; so does a float the agent branches on in
Python (found by tracing, before anything is compiled).

The run directory holds run.json, `sweep.json` (every row's curves, saved after every
chunk), `sweep.md` (one ranked row per setting) and `sweep.png`, and a checkpoint directory
per group (`group-<k>/checkpoints`), so `--resume` continues where a sweep stopped.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from jaxrl_sys.runtime.cli import UsageError
from jaxrl_sys.core.config import ConfigError, field_types, parse_field_values
from jaxrl_sys.runtime.population import (
    Halving, MemberHistory, Mutation, Pbt, exploit_sources, explore, member_score,
    plot_population, population_markdown, rung_ends, survivors,
)
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, RunSpec, resolve, save_run_file
from jaxrl_sys.runtime.sweep_results import SettingResult, SweepOutcome, describe_setting, \
    load_outcome, plot_outcome, save_outcome, score

RANDOM_SCALES = ("log", "uniform")
MEMORY_FRACTION = 0.8  # of the memory available that a group's rows may take


class SweepError(UsageError):
    """A sweep that cannot run (bad keys or values, too large): one line, exit code 2."""


# ----------------------------------------------------------------------------- what to sweep


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


# ----------------------------------------------------------------------------- compiled groups


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


def traceable_keys(plan: Plan, module: Any, env: Any) -> tuple[str, ...]:
    """The swept float keys the agent accepts as traced values: for each, its init and train
    step are traced (not compiled) with that key as a tracer; one the agent branches on in
    Python, or uses as a shape, raises and is kept static (a compiled group per value)."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.runtime.execution import DEVICE_AXIS, placement_fns

    config = plan.configs[0]
    env_ids = jnp.arange(config.num_envs, dtype=jnp.int32)

    def traces(keys: Sequence[str]) -> bool:
        """Whether init and one train step trace with `keys` as tracers."""
        def one_step(values: jax.Array) -> Any:
            agent = module.make(env, dataclasses.replace(
                config, **{k: values[i] for i, k in enumerate(keys)}))
            init_fn, step_fn = placement_fns(agent)
            state, env_state = init_fn(jax.random.PRNGKey(0), env_ids)
            return step_fn(state, env_state, jax.random.PRNGKey(1))

        values = jnp.asarray([[getattr(config, k) for k in keys]], jnp.float32)
        try:
            jax.eval_shape(jax.vmap(one_step, axis_name=DEVICE_AXIS), values)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                jax.errors.TracerIntegerConversionError, TypeError):
            return False
        return True

    if not plan.float_keys or traces(plan.float_keys):  # one trace when all of them can
        return tuple(plan.float_keys)
    return tuple(k for k in plan.float_keys if traces([k]))


def row_bytes(module: Any, env: Any, config: Any) -> int:
    """Bytes of one row's carry (agent state with its replay, env state), from shapes only."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.runtime.execution import placement_fns

    init_fn, _ = placement_fns(module.make(env, config))
    shapes = jax.eval_shape(init_fn, jax.random.PRNGKey(0),
                            jnp.arange(config.num_envs, dtype=jnp.int32))
    return int(sum(np.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(shapes)))


def available_bytes() -> int:
    """Memory the rows may use: the first device's limit on an accelerator, else free RAM."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) * len(jax.devices())
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(groups: Sequence[Group], seeds: int, module: Any, env: Any) -> None:
    """Refuse, before compiling, a group whose rows' state would not fit in memory (three
    copies of the carry: the state, its donated successor and the step's temporaries)."""
    limit = available_bytes() * MEMORY_FRACTION
    for group in groups:
        rows = len(group.members) * seeds
        need = 3 * rows * row_bytes(module, env, group.config)
        if need > limit:
            raise SweepError(
                f"group {group.index + 1}: {rows} rows need about {need / 2**30:.1f} GiB; "
                f"{limit / 2**30:.1f} GiB can be used here: sweep fewer settings or seeds, or "
                f"make the replay buffer smaller")


# ----------------------------------------------------------------------------- running


SWEEP_BATCHINGS = ("auto", "vmap", "map")


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
    from jaxrl_sys.runtime.loops import chunking

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


def sweep(spec: RunSpec, load_agent: Callable[[str], Any], registry: EnvRegistry, *,
          resume: Union[str, Path, None] = None) -> SweepOutcome:
    """Train every setting of `spec.sweep` x `spec.seeds`, write sweep.json/.md/.png in the
    run directory and return the outcome (the ranked table as data: `outcome.table()`).

    Everything is checked before a directory is made or anything compiled: keys, values,
    ranges, settings (each validated), placement (rows over devices) and memory.
    """
    from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices
    from jaxrl_sys.runtime.loops import chunking
    from jaxrl_sys.runtime.metrics import make_run_dir

    resolved = resolve(spec, load_agent, registry, saved_run=resume)
    check_spec(spec, resolved)
    plan = plan_sweep(resolved)
    seeds = spec.seed_list
    request_devices(spec.devices)
    enable_compile_cache()
    env = registry.make(resolved.env_name, **resolved.env_kwargs)
    traced = traceable_keys(plan, resolved.module, env)
    groups = group_settings(plan, traced)
    mapped = batching(spec) == "map"
    for group in groups:
        rows = len(group.members) * len(seeds)
        if (len(group.members) if mapped else rows) % spec.devices:
            raise SweepError(f"group {group.index + 1}: {len(group.members)} settings x "
                             f"{len(seeds)} seeds = {rows} rows do not divide over "
                             f"{spec.devices} devices"
                             + (" in whole settings (--sweep-batching map)" if mapped else ""))
    population = population_of(spec)
    if population is not None:
        check_population(population, spec, plan, traced, len(seeds), mapped)
    check_memory(groups, len(seeds), resolved.module, env)
    threshold = registry.reward_threshold(resolved.env_name)

    if resume is not None:
        run_dir = Path(resume)
    else:
        run_dir = make_run_dir(spec.run_root, f"{spec.agent}-sweep", resolved.env_name)
        save_run_file(run_dir, resolved)
    static = [k.key for k in plan.keys if k.key not in traced]
    print(f"sweep of {spec.agent} on {resolved.env_name}: {len(plan.settings)} settings x "
          f"{len(seeds)} seeds in {len(groups)} compiled group(s) on {spec.devices} device(s); "
          f"traced: {', '.join(traced) or 'none'}; one program per value of: "
          f"{', '.join(static) or 'none'}; run dir {run_dir}", file=sys.stderr)

    saved = load_outcome(run_dir)
    results = [SettingResult(i, dict(s), [], [], []) for i, s in enumerate(plan.settings)]
    for stored in saved.get("settings", []):
        if 0 <= stored.get("index", -1) < len(results):
            results[stored["index"]] = SettingResult(**stored)
    done_groups = set(saved.get("done_groups", []))
    keys = [k.key for k in plan.keys]
    outcome = SweepOutcome(run_dir, results, threshold, seeds, saved.get("train_seconds", 0.0),
                           keys)
    saved_members = saved.get("population", {}).get("members", [])
    histories = ([MemberHistory(**m) for m in saved_members] if saved_members else
                 [MemberHistory(i, [[0, dict(s)]]) for i, s in enumerate(plan.settings)])

    def save() -> None:
        data = {
            "agent": spec.agent, "env": resolved.env_name, "seeds": seeds, "keys": keys,
            "traced": list(traced), "threshold": threshold,
            "groups": [list(g.members) for g in groups], "done_groups": sorted(done_groups),
            "train_seconds": outcome.train_seconds,
            "settings": [dataclasses.asdict(r) for r in results],
            "table": outcome.table(),
        }
        if population is not None:
            data["population"] = {"method": "pbt" if isinstance(population, Pbt) else "halving",
                                  **dataclasses.asdict(population),
                                  "members": [dataclasses.asdict(h) for h in histories]}
        save_outcome(run_dir, data)

    for group in groups:
        if group.index in done_groups:
            continue
        if isinstance(population, Halving):
            seconds = _train_halving(group, plan, resolved, registry, env, seeds, run_dir,
                                     results, save, population)
        else:
            seconds = _train_group(group, plan, resolved, registry, env, seeds, run_dir,
                                   results, save, len(groups), population, histories)
        outcome.train_seconds += seconds
        done_groups.add(group.index)
        save()
    if population is None:
        (run_dir / "sweep.md").write_text(outcome.markdown(), encoding="utf-8")
        plot_outcome(outcome, run_dir / "sweep.png")
    else:
        method = "pbt" if isinstance(population, Pbt) else "halving"
        (run_dir / "sweep.md").write_text(population_markdown(results, histories, keys, method),
                                          encoding="utf-8")
        iters, _ = chunking(plan.configs[0].num_iterations, spec.chunks)
        plot_population(results, histories, traced, iters * plan.configs[0].steps_per_iteration,
                        run_dir / "sweep.png")
    best = (outcome.ranked()[0] if population is None else
            max(results, key=lambda r: (len(r.returns), member_score(r))))
    print((run_dir / "sweep.md").read_text(encoding="utf-8"), end="")
    print(f"done: {len(plan.settings)} settings x {len(seeds)} seeds in "
          f"{outcome.train_seconds:.1f} s training; best setting {best.index} "
          f"({describe_setting(best.values)}): final return {float(np.mean(best.final)):.1f}; "
          f"{run_dir}")
    return outcome


def _train_group(group: Group, plan: Plan, resolved: ResolvedRun, registry: EnvRegistry,
                 env: Any, seeds: list[int], run_dir: Path, results: list[SettingResult],
                 save: Callable[[], None], num_groups: int, pbt: Optional[Pbt] = None,
                 histories: Sequence[MemberHistory] = ()) -> float:
    """Train one compiled group to the end (from its last checkpoint if it has one); with
    `pbt`, exploit and explore every `pbt.interval` chunks (`_pbt_step`)."""
    from jaxrl_sys.runtime import driver
    from jaxrl_sys.runtime.checkpoint import Checkpointer
    from jaxrl_sys.runtime.loops import chunking

    spec = resolved.spec
    iters, num_chunks = chunking(group.config.num_iterations, spec.chunks)
    runner = group_runner(group, plan, resolved, registry, env, len(seeds), iters)
    members = list(group.members)
    values = [dict(plan.settings[m]) for m in members]  # each member's current values
    checkpointer = Checkpointer(run_dir / f"group-{group.index}", keep=spec.keep_checkpoints,
                                save_replay=spec.save_replay)
    carry, start_chunk, seconds_before = None, 0, 0.0
    if checkpointer.latest_chunk() is not None:
        carry, record = checkpointer.restore(runner.init(_row_seeds(seeds, members)))
        start_chunk = int(record["chunk"]) + 1
        seconds_before = float(record.get("train_seconds", 0.0))
        if pbt is not None:
            values = record["member_values"]
            runner.run_chunk.set_settings(_row_settings(values, group.traced, len(seeds)))
        print(f"group {group.index + 1}: resuming after chunk {start_chunk - 1}", file=sys.stderr)
    _forget_after(start_chunk, [results[m] for m in members], histories)
    clock = {"seconds": seconds_before}
    on_chunk = _chunk_recorder(members, seeds, results, iters * group.config.steps_per_iteration,
                               seconds_before, clock, save, spec.progress,
                               f"group {group.index + 1}/{num_groups}", num_chunks)

    def adapt(chunk: int, carry: Any) -> Any:
        """PBT's exploit and explore after `chunk`."""
        carry = _pbt_step(pbt, chunk, carry, runner, members, values, plan, group, spec,
                          results, histories, len(seeds))
        save()
        return carry

    def on_checkpoint(chunk: int, carry: Any) -> None:
        record = {"train_seconds": clock["seconds"]}
        if pbt is not None:
            record["member_values"] = values
        checkpointer.save(chunk, carry, record)

    try:
        driver.train(runner, _row_seeds(seeds, members), num_chunks, on_chunk, carry=carry,
                     start_chunk=start_chunk, checkpoint_every=spec.checkpoint_every,
                     on_checkpoint=on_checkpoint, check=lambda summary: None,
                     adapt=adapt if pbt is not None else None,
                     adapt_every=pbt.interval if pbt is not None else 0)
    finally:
        checkpointer.close()
    return clock["seconds"] - seconds_before


def _row_seeds(seeds: Sequence[int], members: Sequence[int]) -> np.ndarray:
    """The seed of every row of `members` (setting-major: a member's seeds are adjacent)."""
    return np.tile(np.asarray(seeds), len(members))


def _member_rows(positions: Sequence[int], num_seeds: int) -> np.ndarray:
    """The rows of the members at `positions`, seed by seed (a member's seeds are adjacent)."""
    positions = np.asarray(positions)
    return (np.repeat(positions, num_seeds) * num_seeds
            + np.tile(np.arange(num_seeds), len(positions)))


def _row_settings(values: Sequence[dict], traced: Sequence[str],
                  num_seeds: int) -> dict[str, np.ndarray]:
    """Per-row traced values [members x seeds] of the members' values."""
    return {k: np.repeat(np.asarray([v[k] for v in values], np.float32), num_seeds)
            for k in traced}


def _forget_after(start_chunk: int, results: Sequence[SettingResult],
                  histories: Sequence[MemberHistory]) -> None:
    """Drop what was recorded after the checkpoint a run resumes from (trained again)."""
    for r in results:
        del r.env_steps[start_chunk:], r.returns[start_chunk:], r.seconds[start_chunk:]
    for h in histories:
        h.truncate(start_chunk)


def _chunk_recorder(members: Sequence[int], seeds: Sequence[int], results: list[SettingResult],
                    steps_per_chunk: int, seconds_before: float, clock: dict,
                    save: Callable[[], None], progress: bool, label: str,
                    num_chunks: int) -> Callable:
    """The driver's `on_chunk` for the rows of `members`: each member's returns (greedy when
    evaluated) appended to its result, sweep.json saved, a progress line."""
    from jaxrl_sys.runtime import driver

    def on_chunk(summary: driver.ChunkSummary, train_seconds: float) -> bool:
        values = summary.eval_returns if summary.eval_returns is not None else summary.returns
        values = np.asarray(values, float).reshape(len(members), len(seeds))
        finite = (np.ones(values.shape, bool) if summary.state_finite is None
                  else np.asarray(summary.state_finite).reshape(values.shape))
        clock["seconds"] = seconds_before + train_seconds
        for member, row, ok in zip(members, values, finite):
            r = results[member]
            r.env_steps.append((summary.chunk + 1) * steps_per_chunk)
            r.returns.append([float(v) for v in row])
            r.seconds.append(clock["seconds"])
            r.finite = r.finite and bool(ok.all())
        save()
        if progress:
            best = max((results[m] for m in members), key=score)
            print(f"{label} chunk {summary.chunk + 1}/{num_chunks}: best so far setting "
                  f"{best.index} ({describe_setting(best.values)}) return "
                  f"{float(np.mean(best.final)):.1f}", file=sys.stderr, flush=True)
        return False

    return on_chunk


def _scores(members: Sequence[int], results: list[SettingResult], carry: Any,
            num_seeds: int) -> list[float]:
    """The members' recent returns (`population.member_score`), with the returns so far of
    the episodes in progress in `carry` for seeds that finished none in the last chunk."""
    from jaxrl_sys.runtime.driver import running_returns

    running = running_returns(carry.env_state)
    return [member_score(results[m], None if running is None else
                         running[i * num_seeds:(i + 1) * num_seeds])
            for i, m in enumerate(members)]


def _pbt_step(pbt: Pbt, chunk: int, carry: Any, runner: Any, members: list[int],
              values: list[dict], plan: Plan, group: Group, spec: RunSpec,
              results: list[SettingResult], histories: Sequence[MemberHistory],
              num_seeds: int) -> Any:
    """Exploit and explore after `chunk`: the bottom quantile's rows take the agent state of
    a top member's rows (seed for seed), their values are perturbed or drawn afresh, and the
    runner's traced settings change (no compiling). Decided by a generator seeded with the
    run's seed and the chunk, so a resumed run decides the same."""
    from jaxrl_sys.runtime.execution import copy_agent_rows

    rng = np.random.default_rng([spec.seed, chunk, 0x9B7])
    scores = _scores(members, results, carry, num_seeds)
    sources = exploit_sources(scores, pbt.quantile, rng)
    fields = field_types(group.config)
    mutations = [Mutation(k.key, k.values, k.scale, k.low, k.high) for k in plan.keys
                 if fields[k.key] is float]

    def valid(candidate: dict) -> bool:
        try:
            dataclasses.replace(group.config, **candidate).validate()
        except ValueError:
            return False
        return True

    for position, source in enumerate(sources):
        if source == position:
            continue
        values[position] = explore(values[source], mutations, pbt.resample_probability, rng,
                                   valid)
        history = histories[members[position]]
        history.copied.append([chunk, members[source]])
        history.schedule.append([chunk + 1, dict(values[position])])
    rows = _member_rows(sources, num_seeds)
    runner.run_chunk.set_settings(_row_settings(values, group.traced, num_seeds))
    moved = int(np.sum(sources != np.arange(len(members))))
    if spec.progress:
        print(f"pbt after chunk {chunk + 1}: {moved} member(s) copied "
              + ", ".join(f"{members[s]}->{members[p]}" for p, s in enumerate(sources) if s != p),
              file=sys.stderr, flush=True)
    return copy_agent_rows(carry, rows) if moved else carry


def _train_halving(group: Group, plan: Plan, resolved: ResolvedRun, registry: EnvRegistry,
                   env: Any, seeds: list[int], run_dir: Path, results: list[SettingResult],
                   save: Callable[[], None], halving: Halving) -> float:
    """Successive halving over one group's settings: each rung trains its members to its
    end, then the best ceil(n / eta) go on with their whole state. The rows change at every
    rung, so each rung is a program of its own (compiled when it starts)."""
    import jax

    from jaxrl_sys.runtime import driver
    from jaxrl_sys.runtime.checkpoint import Checkpointer
    from jaxrl_sys.runtime.loops import chunking

    spec = resolved.spec
    iters, num_chunks = chunking(group.config.num_iterations, spec.chunks)
    ends = rung_ends(num_chunks, len(group.members), halving.eta)
    counts = [len(group.members)]
    for _ in ends[1:]:
        counts.append(-(-counts[-1] // halving.eta))
    members = list(group.members)
    checkpointer = Checkpointer(run_dir / f"group-{group.index}", keep=spec.keep_checkpoints,
                                save_replay=spec.save_replay)
    carry, runner, start_chunk, seconds_before = None, None, 0, 0.0

    def runner_for(rung_members: list[int]) -> Any:
        return group_runner(dataclasses.replace(group, members=tuple(rung_members)), plan,
                            resolved, registry, env, len(seeds), iters)

    if checkpointer.latest_chunk() is not None:
        members = list(checkpointer.read_record()["members"])
        runner = runner_for(members)
        carry, record = checkpointer.restore(runner.init(_row_seeds(seeds, members)))
        start_chunk = int(record["chunk"]) + 1
        seconds_before = float(record.get("train_seconds", 0.0))
        print(f"halving: resuming after chunk {start_chunk - 1}", file=sys.stderr)
    _forget_after(start_chunk, [results[m] for m in group.members], ())
    clock = {"seconds": seconds_before}
    try:
        for rung, (end, count) in enumerate(zip(ends, counts)):
            if start_chunk >= end:
                continue
            if len(members) > count:  # the rung before has ended: keep its best
                keep = survivors(_scores(members, results, carry, len(seeds)), halving.eta)
                rows = _member_rows(keep, len(seeds))
                members = [members[i] for i in keep]
                runner = runner_for(members)
                carry = jax.device_put(jax.tree.map(lambda x: np.asarray(x)[rows], carry),
                                       runner.carry_sharding())
                if spec.progress:
                    print(f"halving: rung {rung + 1}/{len(ends)} keeps settings "
                          f"{', '.join(map(str, members))}", file=sys.stderr, flush=True)
            runner = runner or runner_for(members)
            on_chunk = _chunk_recorder(members, seeds, results,
                                       iters * group.config.steps_per_iteration,
                                       clock["seconds"], clock, save, spec.progress,
                                       f"rung {rung + 1}/{len(ends)}", num_chunks)
            rung_members = list(members)

            def on_checkpoint(chunk: int, carry: Any) -> None:
                checkpointer.save(chunk, carry, {"train_seconds": clock["seconds"],
                                                 "members": rung_members})

            trained = driver.train(runner, _row_seeds(seeds, members), end, on_chunk,
                                   carry=carry, start_chunk=start_chunk,
                                   checkpoint_every=spec.checkpoint_every,
                                   on_checkpoint=on_checkpoint, check=lambda summary: None)
            carry, start_chunk = trained.carry, end
            if spec.progress:
                print(f"halving: rung {rung + 1}/{len(ends)} ({len(members)} settings) compiled "
                      f"in {trained.compile_seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        checkpointer.close()
    return clock["seconds"] - seconds_before


def group_runner(group: Group, plan: Plan, resolved: ResolvedRun, registry: EnvRegistry,
                 env: Any, num_seeds: int, iters_per_chunk: int) -> Any:
    """The compiled runner of one group: rows = its settings x seeds (setting-major)."""
    from jaxrl_sys.runtime.execution import place_rows, placement_fns

    module, config, spec = resolved.module, group.config, resolved.spec
    settings = {key: np.repeat(np.asarray([plan.settings[m][key] for m in group.members],
                                          np.float32), num_seeds)
                for key in group.traced}
    eval_env = resolved.make_eval_env(registry) if resolved.eval_episodes else None

    def build(row_settings: dict) -> tuple:
        agent = module.make(env, dataclasses.replace(config, **row_settings))
        init_fn, step_fn = placement_fns(agent)
        eval_fn = None
        if eval_env is not None:
            from jaxrl_sys.core.evaluation import make_eval_fn

            eval_fn = make_eval_fn(eval_env, module.greedy_action(agent))
        return init_fn, step_fn, eval_fn

    return place_rows(build, num_envs=config.num_envs, settings=settings,
                      row_devices=spec.devices, iters_per_chunk=iters_per_chunk,
                      eval_episodes=resolved.eval_episodes,
                      eval_outcomes=env.spec.num_players == 2,
                      seeds_per_setting=num_seeds if batching(spec) == "map" else 0)


def batching(spec: RunSpec) -> str:
    """How a device runs its rows: "vmap" (all at once) or "map" (settings one after another,
    seeds vmapped: each setting computes what a run of those seeds computes, bit for bit).
    "auto" maps on a CPU, where it measured as fast (PPO CartPole, 16 settings x 4 seeds), and
    vmaps on an accelerator, where running the settings side by side is the point."""
    if spec.sweep_batching != "auto":
        return spec.sweep_batching
    import jax

    return "map" if jax.devices()[0].platform == "cpu" else "vmap"


@dataclasses.dataclass
class SavedSetting:
    """One setting of a sweep, rebuilt as a run of its seeds: what evaluate.py and arena.py
    use (the same fields and `restore` as `jaxrl_sys.runtime.session.SavedRun`)."""

    run_dir: Path
    resolved: ResolvedRun  # the setting's own config; spec without the sweep
    env: Any
    agent: Any
    restore_rows: Callable[[Optional[int]], tuple[Any, dict]]

    def restore(self, chunk: Optional[int] = None) -> tuple[Any, dict]:
        """The setting's rows of its group's checkpoint (the latest, or after `chunk`):
        a carry of [seeds, ...], and the checkpoint's record."""
        return self.restore_rows(chunk)


@dataclasses.dataclass
class SavedGroup:
    """One compiled group of a sweep, its rows restored together (evaluate.py's
    `--setting all`; `open_setting` takes one member's rows of it)."""

    run_dir: Path
    resolved: ResolvedRun  # the group's first setting's config (the traced values aside)
    env: Any
    agent: Any
    members: tuple[int, ...]  # the settings the group started with
    restore_rows: Callable[[Optional[int]], tuple[list[int], Any, dict]]

    def restore(self, chunk: Optional[int] = None) -> tuple[list[int], Any, dict]:
        """The settings in the checkpoint after `chunk` (default: the latest; fewer than
        `members` after a halving rung), its carry of [settings * seeds, ...] (setting-major)
        and its record."""
        return self.restore_rows(chunk)


def open_groups(run_dir: Union[str, Path], load_agent: Callable[[str], Any],
                registry: EnvRegistry, set_up_devices: bool = True) -> list[SavedGroup]:
    """Every trained group of the sweep in `run_dir` (nothing restored yet); with
    `set_up_devices`, the sweep's devices are requested first."""
    return _open_groups(run_dir, load_agent, registry, set_up_devices)[1]


def _open_groups(run_dir: Union[str, Path], load_agent: Callable[[str], Any],
                 registry: EnvRegistry, set_up_devices: bool) -> tuple[Plan, list[SavedGroup]]:
    """The sweep's plan and its trained groups (`open_groups`)."""
    from jaxrl_sys.runtime.checkpoint import Checkpointer
    from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices
    from jaxrl_sys.runtime.loops import chunking
    from jaxrl_sys.runtime.run_spec import load_spec

    spec = load_spec(run_dir)
    if not spec.sweep:
        raise SweepError(f"{run_dir} is not a sweep (its run.json has no --sweep)")
    resolved = resolve(spec, load_agent, registry, saved_run=run_dir)
    plan = plan_sweep(resolved)
    saved = load_outcome(run_dir)
    if set_up_devices:
        request_devices(spec.devices)
        enable_compile_cache()
    env = registry.make(resolved.env_name, **resolved.env_kwargs)

    def opened(group_index: int, members: tuple[int, ...]) -> SavedGroup:
        group = Group(group_index, members, plan.configs[members[0]], tuple(saved["traced"]))

        def restore_rows(chunk: Optional[int]) -> tuple[list[int], Any, dict]:
            iters, _ = chunking(group.config.num_iterations, spec.chunks)
            checkpointer = Checkpointer(Path(run_dir) / f"group-{group_index}", create=False)
            try:
                kept = list(checkpointer.read_record(chunk).get("members", members))
                runner = group_runner(dataclasses.replace(group, members=tuple(kept)), plan,
                                      resolved, registry, env, spec.seeds, iters)
                carry, record = checkpointer.restore(runner.init(_row_seeds(spec.seed_list,
                                                                            kept)), chunk)
            finally:
                checkpointer.close()
            return kept, carry, record

        own = dataclasses.replace(resolved, config=group.config)
        return SavedGroup(Path(run_dir), own, env, resolved.module.make(env, group.config),
                          members, restore_rows)

    return plan, [opened(g, tuple(members)) for g, members in enumerate(saved.get("groups", []))]


def open_setting(run_dir: Union[str, Path], index: int, load_agent: Callable[[str], Any],
                 registry: EnvRegistry, set_up_devices: bool = True) -> SavedSetting:
    """Setting `index` of the sweep in `run_dir` (nothing restored yet); with
    `set_up_devices`, the sweep's devices are requested first."""
    import jax

    plan, groups = _open_groups(run_dir, load_agent, registry, set_up_devices)
    if not 0 <= index < len(plan.settings):
        raise SweepError(f"--setting {index}: {run_dir} has settings 0..{len(plan.settings) - 1}")
    group = next((g for g in groups if index in g.members), None)
    if group is None:
        raise SweepError(f"{run_dir}: setting {index} has not been trained yet")
    spec = group.resolved.spec

    def restore_rows(chunk: Optional[int]) -> tuple[Any, dict]:
        kept, carry, record = group.restore(chunk)
        if index not in kept:
            raise SweepError(f"{run_dir}: setting {index} was dropped at a halving rung before "
                             f"chunk {record['chunk']}; pick an earlier checkpoint with --chunk")
        first = kept.index(index) * spec.seeds
        return jax.tree.map(lambda x: x[first:first + spec.seeds], carry), record

    config = plan.configs[index]
    own = dataclasses.replace(group.resolved, config=config,
                              spec=dataclasses.replace(spec, sweep=(), samples=0))
    return SavedSetting(Path(run_dir), own, group.env, group.resolved.module.make(group.env,
                                                                                  config),
                        restore_rows)
