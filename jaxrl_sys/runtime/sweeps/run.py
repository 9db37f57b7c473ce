"""Running a sweep: `sweep(spec, load_agent, registry)` checks everything, then trains each
compiled group to the end (with PBT or halving when asked), saving sweep.json after every chunk
and writing sweep.md and sweep.png at the end; `--resume` goes on from each group's checkpoint."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from jaxrl_sys.runtime import driver
from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices
from jaxrl_sys.runtime.loops import chunking
from jaxrl_sys.runtime.metrics import make_run_dir
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, RunSpec, resolve, save_run_file
from jaxrl_sys.runtime.sweeps.halving import train_halving
from jaxrl_sys.runtime.sweeps.keys import SweepError
from jaxrl_sys.runtime.sweeps.memory import check_memory
from jaxrl_sys.runtime.sweeps.pbt import pbt_step
from jaxrl_sys.runtime.sweeps.plan import (
    Group, Plan, check_population, check_spec, group_settings, plan_sweep, population_of,
)
from jaxrl_sys.runtime.sweeps.population import (
    Halving, MemberHistory, Pbt, member_score, plot_population, population_markdown,
)
from jaxrl_sys.runtime.sweeps.record import chunk_recorder, forget_after
from jaxrl_sys.runtime.sweeps.results import (
    SettingResult, SweepOutcome, describe_setting, load_outcome, plot_outcome, save_outcome,
)
from jaxrl_sys.runtime.sweeps.rows import batching, group_runner, row_seeds, row_settings
from jaxrl_sys.runtime.sweeps.trace import traceable_keys


def sweep(spec: RunSpec, load_agent: Callable[[str], Any], registry: EnvRegistry, *,
          resume: Union[str, Path, None] = None) -> SweepOutcome:
    """Train every setting of `spec.sweep` x `spec.seeds`, write sweep.json/.md/.png in the
    run directory and return the outcome (the ranked table as data: `outcome.table()`).

    Everything is checked before a directory is made or anything compiled: keys, values,
    ranges, settings (each validated), placement (rows over devices) and memory.
    """
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
            seconds = train_halving(group, plan, resolved, registry, env, seeds, run_dir,
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
    `pbt`, exploit and explore every `pbt.interval` chunks (`pbt.pbt_step`)."""
    spec = resolved.spec
    iters, num_chunks = chunking(group.config.num_iterations, spec.chunks)
    runner = group_runner(group, plan, resolved, registry, env, len(seeds), iters)
    members = list(group.members)
    values = [dict(plan.settings[m]) for m in members]  # each member's current values
    checkpointer = Checkpointer(run_dir / f"group-{group.index}", keep=spec.keep_checkpoints,
                                save_replay=spec.save_replay)
    carry, start_chunk, seconds_before = None, 0, 0.0
    if checkpointer.latest_chunk() is not None:
        carry, record = checkpointer.restore(runner.init(row_seeds(seeds, members)))
        start_chunk = int(record["chunk"]) + 1
        seconds_before = float(record.get("train_seconds", 0.0))
        if pbt is not None:
            values = record["member_values"]
            runner.run_chunk.set_settings(row_settings(values, group.traced, len(seeds)))
        print(f"group {group.index + 1}: resuming after chunk {start_chunk - 1}", file=sys.stderr)
    forget_after(start_chunk, [results[m] for m in members], histories)
    clock = {"seconds": seconds_before}
    on_chunk = chunk_recorder(members, seeds, results, iters * group.config.steps_per_iteration,
                              seconds_before, clock, save, spec.progress,
                              f"group {group.index + 1}/{num_groups}", num_chunks)

    def adapt(chunk: int, carry: Any) -> Any:
        """PBT's exploit and explore after `chunk`."""
        carry = pbt_step(pbt, chunk, carry, runner, members, values, plan, group, spec,
                         results, histories, len(seeds))
        save()
        return carry

    def on_checkpoint(chunk: int, carry: Any) -> None:
        record = {"train_seconds": clock["seconds"]}
        if pbt is not None:
            record["member_values"] = values
        checkpointer.save(chunk, carry, record)

    try:
        driver.train(runner, row_seeds(seeds, members), num_chunks, on_chunk, carry=carry,
                     start_chunk=start_chunk, checkpoint_every=spec.checkpoint_every,
                     on_checkpoint=on_checkpoint, check=lambda summary: None,
                     adapt=adapt if pbt is not None else None,
                     adapt_every=pbt.interval if pbt is not None else 0)
    finally:
        checkpointer.close()
    return clock["seconds"] - seconds_before
