"""Where a MuZero run's playing strength comes from: the greedy return of its network acting
by the prior alone, by search over its learned model, and by search over the real env.

    python benchmarks/search_gain.py RUN_DIR [--episodes 32] [--simulations 16,64] [--chunk N]

For a single-player pure-JAX env. Every row plays the same greedy episodes (evaluation
keys) with the run's saved parameters:

- `prior`: argmax of the prediction network's policy at the real observation, no search;
- `learned, N sims`: greedy search over the learned model (the run's own acting policy at
  its own N);
- `env, N sims`: the same network's representation and prediction on real states, with the
  real env stepped inside the tree (AlphaZero's search, `model=env`), no rule heads.

If the learned model's search plays no better than the prior while the env's search does,
the model (its dynamics, rewards and values on unrolled latents), not the policy and value
learning, limits the run. Prints one line per row and, with `--json`, writes them.

With `--probe-steps N` (and seed 0's parameters) it also measures the one-step model along N
steps of the learned search's greedy play in 64 envs: for every move a, the model's value
after it, v(g(h(o), a)), against the network's value of the real next observation, v(h(o'));
and how often the model's best move, by r + gamma v, is the real next observations' best.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys import agents, envs
from jaxrl_sys.agents.muzero import agent as muzero
from jaxrl_sys.agents.muzero.config import Config
from jaxrl_sys.agents.muzero.defaults import LEARNED_MODEL_ONLY
from jaxrl_sys.agents.muzero.networks import MuZeroNetwork, predict_scalar, supports
from jaxrl_sys.core.config import ConfigError, apply_overrides
from jaxrl_sys.core.evaluation import evaluate
from jaxrl_sys.core.value_transform import logits_to_scalar
from jaxrl_sys.runtime.session import open_run


def prior_policy(network: MuZeroNetwork, value_support):
    """Greedy actions [B] of the prediction network's prior at observations [B, ...]."""
    def act(state, obs, key, legal=None, env_state=None):
        latent = network.apply(state.params, obs, method=MuZeroNetwork.represent)
        logits, _, _ = predict_scalar(network, value_support, state.params, latent)
        if legal is not None:
            logits = jnp.where(legal, logits, -jnp.inf)
        return jnp.argmax(logits, -1).astype(jnp.int32)
    return act


def one_step_model_accuracy(env, network: MuZeroNetwork, config: Config, state, act,
                            num_envs: int, steps: int, key: jax.Array) -> dict[str, float]:
    """The learned model's one-step accuracy along `steps` steps of `act`'s play in `num_envs`
    envs, averaged over states: `value_gap` (mean |v(g(h(o), a)) - v(h(o'))| over moves),
    `model_best_agrees` and `prior_best_agrees` (how often the model's, and the prior's,
    best move is the best by the real next observations' r + gamma v(h(o'))), and the
    spreads (max - min over moves) of the model's and the real one-step Q."""
    value_support, reward_support = supports(config)
    params = state.params
    moves_all = jnp.arange(env.spec.action_space.n)
    step = jax.vmap(env.step)

    def value_of(obs):
        latent = network.apply(params, obs, method=MuZeroNetwork.represent)
        return latent, predict_scalar(network, value_support, params, latent)

    def one(carry, step_key):
        obs, env_state = carry
        real_key, act_key = jax.random.split(step_key)
        env_keys = jax.random.split(real_key, num_envs)
        latent, (prior_logits, _, _) = value_of(obs)

        def after(move):
            """Model and real values and one-step Q [N] after `move` in every env."""
            moves = jnp.full((num_envs,), move, jnp.int32)
            next_latent, reward_logits, end_logit = network.apply(
                params, latent, moves, method=MuZeroNetwork.dynamics)
            _, model_value, _ = predict_scalar(network, value_support, params, next_latent)
            model_ends = jax.nn.sigmoid(end_logit) > 0.5
            q_model = (logits_to_scalar(reward_logits, reward_support)
                       + config.gamma * model_value * (1.0 - model_ends))
            _, _, reward, terminated, _, info = step(env_keys, env_state, moves)
            _, (_, real_value, _) = value_of(info["final_observation"])
            q_real = reward + config.gamma * real_value * (1.0 - terminated)
            return model_value, real_value, q_model, q_real

        model_value, real_value, q_model, q_real = jax.vmap(after)(moves_all)  # [A, N]
        real_best = jnp.argmax(q_real, 0)
        measured = jnp.stack([
            jnp.mean(jnp.abs(model_value - real_value)),
            jnp.mean(jnp.argmax(q_model, 0) == real_best),
            jnp.mean(jnp.argmax(prior_logits, -1) == real_best),
            jnp.mean(q_model.max(0) - q_model.min(0)),
            jnp.mean(q_real.max(0) - q_real.min(0)),
        ])
        moves = act(state, obs, act_key)
        obs, env_state = step(jax.random.split(act_key, num_envs), env_state, moves)[:2]
        return (obs, env_state), measured

    reset_key, run_key = jax.random.split(key)
    start = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
    _, measured = jax.jit(lambda start, keys: jax.lax.scan(one, start, keys))(
        start, jax.random.split(run_key, steps))
    names = ("value_gap", "model_best_agrees", "prior_best_agrees", "model_q_spread",
             "real_q_spread")
    return {name: round(float(x), 3) for name, x in zip(names, np.asarray(measured).mean(0))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--simulations", default="",
                   help="comma-separated simulation counts besides the run's own")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint (default: latest)")
    p.add_argument("--search-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config field changed for the learned model's extra rows at play "
                        "time (q_range=10, value_scale=0.05, ...)")
    p.add_argument("--probe-steps", type=int, default=0,
                   help="also measure the one-step model along this many steps (seed 0)")
    p.add_argument("--probe-only", action="store_true",
                   help="only the one-step model probe, no greedy episodes")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        extra = [int(n) for n in args.simulations.split(",") if n.strip()]
    except ValueError:
        print(f"search_gain: --simulations takes integers, got {args.simulations!r}",
              file=sys.stderr)
        return 2
    if args.episodes < 1 or any(n < 1 for n in extra):
        print("search_gain: --episodes and --simulations must be at least 1", file=sys.stderr)
        return 2
    if args.probe_steps < 0:
        print("search_gain: --probe-steps must be at least 0", file=sys.stderr)
        return 2
    if not (args.run_dir / "run.json").is_file():
        print(f"search_gain: no run directory at {args.run_dir}", file=sys.stderr)
        return 2
    saved = open_run(args.run_dir, agents.load, envs)
    resolved = saved.resolved
    config = resolved.config
    if resolved.spec.agent != "muzero" or config.model != "learned":
        print("search_gain: needs a learned-model muzero run", file=sys.stderr)
        return 2
    eval_env = resolved.make_eval_env(envs)
    if getattr(eval_env.spec, "num_players", 1) != 1:
        print("search_gain: single-player envs only (board games: benchmarks/tactics.py)",
              file=sys.stderr)
        return 2
    try:
        changed = apply_overrides(config, args.search_set) if args.search_set else config
    except ConfigError as error:
        print(f"search_gain: {error}", file=sys.stderr)
        return 2
    carry, record = saved.restore(args.chunk)
    episode_ids = jnp.arange(args.episodes)
    key = jax.random.PRNGKey(0)

    def returns(policy) -> np.ndarray:
        """Greedy returns [seeds, episodes] of `policy` with each seed's parameters."""
        play = jax.jit(jax.vmap(lambda state: evaluate(eval_env, policy, state, key,
                                                       episode_ids)))
        return np.asarray(jax.device_get(play(carry.agent_state))[0])

    network = muzero.build_network(eval_env.spec, config)
    value_support, _ = supports(config)
    rows = [("prior", prior_policy(network, value_support))]
    for sims in [config.num_simulations, *[n for n in extra if n != config.num_simulations]]:
        learned = dataclasses.replace(config, num_simulations=sims)
        rows.append((f"learned, {sims} sims",
                     muzero.greedy_action(muzero.make(eval_env, learned))))
        if changed is not config:
            rows.append((f"learned, {sims} sims, {' '.join(args.search_set)}",
                         muzero.greedy_action(muzero.make(
                             eval_env, dataclasses.replace(changed, num_simulations=sims)))))
    shipped = Config()
    env_model = dataclasses.replace(config, model="env", rule_heads=False,
                                    **{name: getattr(shipped, name)
                                       for name in LEARNED_MODEL_ONLY})
    rows.append((f"env, {config.num_simulations} sims",
                 muzero.greedy_action(muzero.make(eval_env, env_model))))
    results, probe = [], None
    print(f"{args.run_dir} chunk {record['chunk']}, {args.episodes} greedy episodes per seed")
    if args.probe_steps:
        seed_0 = jax.tree.map(lambda x: x[0], carry.agent_state)
        probe = one_step_model_accuracy(eval_env, network, config, seed_0, rows[1][1], 64,
                                        args.probe_steps, jax.random.PRNGKey(3))
        print("one-step model (seed 0): " + ", ".join(f"{k} {v}" for k, v in probe.items()),
              flush=True)
    for name, policy in ([] if args.probe_only else rows):
        per_seed = returns(policy).mean(-1)
        results.append({"policy": name, "per_seed": per_seed.round(2).tolist(),
                        "mean": round(float(per_seed.mean()), 2)})
        print(f"{name:24s} mean {per_seed.mean():7.2f}   per seed {np.round(per_seed, 1)}",
              flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"run_dir": str(args.run_dir),
                                         "chunk": record["chunk"], "rows": results,
                                         "one_step_model": probe}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
