"""A trained sweep reopened from its run directory: its compiled groups and any one setting,
rebuilt as runs of their seeds whose checkpoints evaluate.py and arena.py restore."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Optional, Union

import jax

from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices
from jaxrl_sys.runtime.loops import chunking
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, load_spec, resolve
from jaxrl_sys.runtime.sweeps.keys import SweepError
from jaxrl_sys.runtime.sweeps.plan import Group, Plan, plan_sweep
from jaxrl_sys.runtime.sweeps.results import load_outcome
from jaxrl_sys.runtime.sweeps.rows import group_runner, row_seeds


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
                carry, record = checkpointer.restore(
                    runner.init(row_seeds(spec.seed_list, kept)), chunk)
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
