"""A compiled group's rows, settings x seeds in setting-major order (a member's seeds are
adjacent): each row's seed and traced values, the members' scores from their rows, and the
compiled runner over them."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np

from jaxrl_sys.core.evaluation import make_eval_fn
from jaxrl_sys.runtime.driver import running_returns
from jaxrl_sys.runtime.execution import place_rows, placement_fns
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, RunSpec
from jaxrl_sys.runtime.sweeps.plan import Group, Plan
from jaxrl_sys.runtime.sweeps.population import member_score
from jaxrl_sys.runtime.sweeps.results import SettingResult


def row_seeds(seeds: Sequence[int], members: Sequence[int]) -> np.ndarray:
    """The seed of every row of `members` (setting-major: a member's seeds are adjacent)."""
    return np.tile(np.asarray(seeds), len(members))


def member_rows(positions: Sequence[int], num_seeds: int) -> np.ndarray:
    """The rows of the members at `positions`, seed by seed (a member's seeds are adjacent)."""
    positions = np.asarray(positions)
    return (np.repeat(positions, num_seeds) * num_seeds
            + np.tile(np.arange(num_seeds), len(positions)))


def row_settings(values: Sequence[dict], traced: Sequence[str],
                 num_seeds: int) -> dict[str, np.ndarray]:
    """Per-row traced values [members x seeds] of the members' values."""
    return {k: np.repeat(np.asarray([v[k] for v in values], np.float32), num_seeds)
            for k in traced}


def member_scores(members: Sequence[int], results: list[SettingResult], carry: Any,
                  num_seeds: int) -> list[float]:
    """The members' recent returns (`population.member_score`), with the returns so far of
    the episodes in progress in `carry`'s rows for seeds that finished none in the last
    chunk."""
    running = running_returns(carry.env_state)
    return [member_score(results[m], None if running is None else
                         running[i * num_seeds:(i + 1) * num_seeds])
            for i, m in enumerate(members)]


def group_runner(group: Group, plan: Plan, resolved: ResolvedRun, registry: EnvRegistry,
                 env: Any, num_seeds: int, iters_per_chunk: int) -> Any:
    """The compiled runner of one group: rows = its settings x seeds (setting-major)."""
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
    return "map" if jax.devices()[0].platform == "cpu" else "vmap"
