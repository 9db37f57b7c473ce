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
    results = []
    print(f"{args.run_dir} chunk {record['chunk']}, {args.episodes} greedy episodes per seed")
    for name, policy in rows:
        per_seed = returns(policy).mean(-1)
        results.append({"policy": name, "per_seed": per_seed.round(2).tolist(),
                        "mean": round(float(per_seed.mean()), 2)})
        print(f"{name:24s} mean {per_seed.mean():7.2f}   per seed {np.round(per_seed, 1)}",
              flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"run_dir": str(args.run_dir),
                                         "chunk": record["chunk"], "rows": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
