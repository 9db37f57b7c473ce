"""Catches per episode on JaxMARL's predator-prey (`MPE_simple_tag_v3`: 3 predators, 1 prey,
26-step episodes): `python benchmarks/predator_prey.py RUN_DIR [RUN_DIR ...] --episodes 64`.

Prints a markdown table, one row per run directory (each of its seeds' latest checkpoint,
played greedily; a frozen team samples from its initial, near-uniform policy), a first row
where every agent moves uniformly at random, and (`--cross A B`) rows of run A's predators
against run B's prey: each team's mean return and the catches per
episode. Every catch pays each of the 3 predators 10 (JaxMARL's `simple_tag` rewards, no
shaping), so catches = the predators' team return / 30. Runs come from `jaxrl-train --agent
mappo|ippo --env jaxmarl:MPE_simple_tag_v3 --set policies=by_team [--set frozen_teams=agent]`.
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

ENV = "jaxmarl:MPE_simple_tag_v3"
PER_CATCH = 10.0  # what each predator earns for a catch


def random_team_returns(env, episodes: int, seed: int) -> np.ndarray:
    """[episodes, K] team returns of uniformly random play by every agent."""
    from jaxrl_sys.core.evaluation import evaluate_teams

    agents, actions = env.spec.num_agents, env.spec.action_space.n

    def uniform(params, obs, key, **context):
        """Every agent's move drawn uniformly."""
        return jax.random.randint(key, (obs.shape[0], agents), 0, actions)

    run = jax.jit(lambda key: evaluate_teams(env, uniform, None, key, jnp.arange(episodes)))
    return np.asarray(run(jax.random.PRNGKey(seed)))


def run_team_returns(run_dir: str, episodes: int, seed: int) -> tuple[str, np.ndarray]:
    """(a label, [seeds, episodes, K] team returns) of a run's latest checkpoint, greedy."""
    from jaxrl_sys import agents, envs
    from jaxrl_sys.core.evaluation import evaluate_teams
    from jaxrl_sys.runtime.session import open_run

    saved = open_run(run_dir, agents.load, envs)
    carry, record = saved.restore(None)
    resolved = saved.resolved
    if resolved.env_name != ENV:
        sys.exit(f"error: {run_dir} trained on {resolved.env_name}, not {ENV}")
    env = resolved.make_eval_env(envs)
    policy = resolved.module.greedy_action(saved.agent)
    run = jax.jit(jax.vmap(lambda state: evaluate_teams(
        env, policy, state, jax.random.PRNGKey(seed), jnp.arange(episodes))))
    label = (f"{label_of(saved)}, {len(resolved.seeds)} seeds, "
             f"{steps_per_seed(run_dir, record['chunk']) / 1e6:.2f}M steps/seed")
    return label, np.asarray(run(carry.agent_state))


def steps_per_seed(run_dir: str, chunk: int) -> int:
    """Env steps per seed at the end of chunk `chunk` (the run's metrics.jsonl, one line per
    chunk)."""
    import json
    import pathlib

    lines = pathlib.Path(run_dir, "metrics.jsonl").read_text().splitlines()
    return int(json.loads(lines[chunk])["env_steps_per_seed"])


def cross_team_returns(predator_run: str, prey_run: str, episodes: int,
                       seed: int) -> tuple[str, np.ndarray]:
    """(a label, [seeds, episodes, K] team returns) of the first run's predators (greedy)
    against the second run's prey (greedy, or sampling where its run froze it), seed by seed:
    whom each side learned to beat."""
    import dataclasses

    from jaxrl_sys import agents, envs
    from jaxrl_sys.core.evaluation import evaluate_teams
    from jaxrl_sys.runtime.session import open_run

    predators, prey = (open_run(run, agents.load, envs) for run in (predator_run, prey_run))
    states = [saved.restore(None)[0].agent_state for saved in (predators, prey)]
    # every leaf [seeds, K, ...]: team 0 from the predators' run, the rest from the prey's
    params = jax.tree.map(lambda a, b: a.at[:, 1:].set(b[:, 1:]), states[0].params,
                          states[1].params)
    resolved = predators.resolved
    # the prey acts as in its own run: greedy, or (frozen there) sampling its initial policy
    prey_frozen = tuple(t for t in prey.agent.config.frozen_teams
                        if t != predators.agent.spec.team_names[0])
    config = dataclasses.replace(predators.agent.config, frozen_teams=prey_frozen)
    env = resolved.make_eval_env(envs)
    policy = resolved.module.greedy_action(resolved.module.make(env, config, axis_name=None))
    run = jax.jit(jax.vmap(lambda state: evaluate_teams(
        env, policy, state, jax.random.PRNGKey(seed), jnp.arange(episodes))))
    label = f"predators of {label_of(predators)}; prey of {label_of(prey)}"
    return label, np.asarray(run(states[0].replace(params=params)))


def label_of(saved) -> str:
    """How a run trained: self-play, or against which frozen team."""
    frozen = saved.agent.config.frozen_teams
    return (f"{saved.resolved.spec.agent} "
            f"({'frozen ' + ', '.join(frozen) if frozen else 'self-play'})")


def row(label: str, team_returns: np.ndarray, names: tuple[str, ...], predators: int) -> str:
    """One table row: each team's mean return (and the spread of seed means) and catches."""
    per_seed = team_returns.reshape(-1, team_returns.shape[-2], team_returns.shape[-1])
    means = per_seed.mean(axis=1)  # [seeds, K]
    cells = [f"{means[:, k].mean():.1f} ({means[:, k].min():.1f} to {means[:, k].max():.1f})"
             for k in range(len(names))]
    catches = means[:, 0] / (PER_CATCH * predators)
    return (f"| {label} | " + " | ".join(cells) +
            f" | {catches.mean():.2f} ({catches.min():.2f} to {catches.max():.2f}) |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="*", help="predator-prey runs to evaluate")
    p.add_argument("--episodes", type=int, default=64, help="episodes per seed")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--cross", nargs=2, action="append", default=[],
                   metavar=("PREDATOR_RUN", "PREY_RUN"),
                   help="also play one run's predators against another's prey (same agent, "
                        "config and seeds)")
    args = p.parse_args(argv)
    if args.episodes < 1:
        p.error(f"--episodes must be >= 1, got {args.episodes}")
    from jaxrl_sys import envs

    env = envs.make(ENV)
    names = env.spec.team_names
    predators = env.spec.teams.count(names[0])
    print(f"| {ENV}: {args.episodes} greedy episodes per seed | "
          + " | ".join(f"return, {n}" for n in names) + " | catches per episode |")
    print("|---|" + "---:|" * (len(names) + 1))
    print(row("every agent uniformly random", random_team_returns(env, args.episodes,
                                                                  args.seed)[None],
              names, predators))
    for run_dir in args.run_dirs:
        print(row(*run_team_returns(run_dir, args.episodes, args.seed), names, predators))
    for predator_run, prey_run in args.cross:
        print(row(*cross_team_returns(predator_run, prey_run, args.episodes, args.seed), names,
                  predators))
    return 0


if __name__ == "__main__":
    sys.exit(main())
