"""Catches per episode on JaxMARL's predator-prey (`MPE_simple_tag_v3`: 3 predators, 1 prey,
26-step episodes): `python benchmarks/predator_prey.py RUN_DIR [RUN_DIR ...] --episodes 64`.

Prints a markdown table, one row per run directory (each of its seeds' latest checkpoint,
played greedily; a frozen team samples from its initial, near-uniform policy) and a first row
where every agent moves uniformly at random: each team's mean return and the catches per
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
    config = saved.agent.config
    frozen = f", frozen {','.join(config.frozen_teams)}" if config.frozen_teams else ""
    label = (f"{resolved.spec.agent}{frozen}, {len(resolved.seeds)} seeds, "
             f"{int(record['env_steps_per_seed']) if 'env_steps_per_seed' in record else '?'} "
             "steps/seed")
    return label, np.asarray(run(carry.agent_state))


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
