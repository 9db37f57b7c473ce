"""Our offline learners beside JAX-CORL's: gradient steps per second on the same dataset,
network and batch. `python benchmarks/bench_offline.py --dataset DIR --jax-corl PATH`.

JAX-CORL (github.com/nissymori/JAX-CORL) is not vendored: `--jax-corl` is the user's checkout
(`git clone https://github.com/nissymori/JAX-CORL`); its single-file `algos/iql.py` and
`algos/cql.py` are loaded with importlib. They import `d4rl`, `gym` and `wandb` at the top
for their `__main__` block only, which is not run: empty stand-in modules are put in
`sys.modules` while a file loads (and taken out again; every attribute an empty class), and `sys.argv` is emptied for their
command-line config. They need `distrax`, `omegaconf` and `pydantic`.

Both sides train on our dataset (a Minari dataset, `--dataset`): theirs as their
`Transition` (observations, actions, rewards, next_observations, `dones` where a step
terminated and, where their version has it, `dones_float` where an episode ended, as their
D4RL loader marks them). Network: two layers of 256 (their defaults
and ours), batch 256. Theirs runs its `update_n_times` (`n_jitted_updates` steps per
dispatch, 8 by default, as their scripts run), ours its chunk of iterations
(`updates_per_iteration` steps each, 100 by default) on one device, both compiled first and
alternated for `--repeats` rounds; the table gives each side's median steps per second and
the ratio. The algorithms are the same papers' but not the same code: their IQL updates the
value, actor and critics one after another and puts LayerNorm in the value network; ours
takes one step on the three losses summed, each reaching its own network only; their CQL
(CORL's) and ours sample 10 actions of each kind per state.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import sys
import time
import types
from pathlib import Path

import jax
import numpy as np

from jaxrl_sys import agents, envs
from jaxrl_sys.agents.families.offline import load_transitions
from jaxrl_sys.runtime.devices import set_safe_cpu_flags
from jaxrl_sys.runtime.execution import place, placement_fns

ALGOS = {"iql": ("iql", "IQLConfig", "create_iql_train_state", "IQL"),
         "cql": ("cql", "CQLConfig", "create_cql_train_state", "CQL")}


class StandIn(types.ModuleType):
    """A module whose every attribute is an empty class (what annotations such as `gym.Env`
    need at load time)."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


@contextlib.contextmanager
def stand_ins(names: tuple[str, ...]):
    """Stand-in modules for `names` while a peer's file loads (only those not installed),
    and `sys.argv` without our flags (their config reads the command line)."""
    added = [name for name in names if importlib.util.find_spec(name) is None]
    for name in added:
        sys.modules[name] = StandIn(name)
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        yield
    finally:
        sys.argv = argv
        for name in added:
            sys.modules.pop(name, None)


def load_peer(checkout: Path, algo: str) -> types.ModuleType:
    """JAX-CORL's `algos/<algo>.py` from the user's checkout, as a module."""
    path = checkout / "algos" / f"{algo}.py"
    if not path.is_file():
        raise SystemExit(f"no {path}: --jax-corl is a checkout of "
                         "https://github.com/nissymori/JAX-CORL")
    spec = importlib.util.spec_from_file_location(f"jax_corl_{algo}", path)
    module = importlib.util.module_from_spec(spec)
    with stand_ins(("d4rl", "gym", "wandb")):
        spec.loader.exec_module(module)
    return module


def theirs(peer: types.ModuleType, names: tuple, data, steps: int, high: np.ndarray):
    """(timed run, steps per call) of the peer's update; actions divided by the env's bound
    `high` into D4RL's [-1, 1], which their policies assume."""
    _, config_name, create_name, algo_name = names
    config = getattr(peer, config_name)(batch_size=256, max_steps=max(steps, 1))
    assert tuple(config.hidden_dims) == (256, 256), config.hidden_dims  # their default
    if hasattr(config, "action_dim"):  # their __main__ sets it from the env
        config.action_dim = int(np.prod(data.actions.shape[1:]))
    peer.config = config  # their networks read the module's global config
    columns = {"observations": data.obs, "actions": data.actions / high,
               "rewards": data.rewards,
               "next_observations": data.next_obs, "dones": data.terminated,
               "dones_float": data.terminated | data.truncated}
    dataset = peer.Transition(**{field: jax.numpy.asarray(columns[field], np.float32)
                                 for field in peer.Transition._fields})
    state = getattr(peer, create_name)(jax.random.PRNGKey(0), dataset.observations[0],
                                       dataset.actions[0], config)
    update = jax.jit(getattr(peer, algo_name).update_n_times, static_argnums=(3,))
    key = jax.random.PRNGKey(1)
    jax.block_until_ready(update(state, dataset, key, config))  # compile

    def run(calls: int) -> float:
        nonlocal state
        start = time.perf_counter()
        for i in range(calls):
            state, _ = update(state, dataset, jax.random.fold_in(key, i), config)
        jax.block_until_ready(state)
        return time.perf_counter() - start

    return run, config.n_jitted_updates


def ours(name: str, env_name: str, dataset: str, steps: int):
    """(timed run, steps per chunk) of our agent on one device."""
    module = agents.load(name)
    config = dataclasses.replace(module.default_config(env_name), dataset=dataset,
                                 hidden=(256, 256), batch_size=256)
    agent = module.make(envs.make(env_name), config)
    iters = max(1, steps // config.updates_per_iteration)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters)
    carry = runner.init(np.asarray([0]))
    carry, _ = runner.run_chunk(carry)  # compile and warm
    jax.block_until_ready(carry)

    def run(chunks: int) -> float:
        nonlocal carry
        start = time.perf_counter()
        for _ in range(chunks):
            carry, _ = runner.run_chunk(carry)
        jax.block_until_ready(carry)
        return time.perf_counter() - start

    return run, iters * config.updates_per_iteration


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, help="a Minari dataset directory")
    parser.add_argument("--env", default="Pendulum-v1", help="the env the dataset names")
    parser.add_argument("--jax-corl", type=Path, required=True,
                        help="a checkout of https://github.com/nissymori/JAX-CORL")
    parser.add_argument("--algos", default="iql,cql")
    parser.add_argument("--steps", type=int, default=800, help="gradient steps per round")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON")
    args = parser.parse_args()
    set_safe_cpu_flags()

    env = envs.make(args.env)
    if not hasattr(env.spec.action_space, "low"):
        raise SystemExit(f"{args.env} has discrete actions: JAX-CORL's IQL and CQL take "
                         "continuous ones")
    rows = []
    for algo in args.algos.split(","):
        config = agents.load(algo).default_config(args.env)
        data = load_transitions(dataclasses.replace(config, dataset=args.dataset), env.spec)
        peer_run, peer_chunk = theirs(load_peer(args.jax_corl, ALGOS[algo][0]), ALGOS[algo],
                                      data, args.steps,
                                      np.asarray(env.spec.action_space.high, np.float32))
        our_run, our_chunk = ours(algo, args.env, args.dataset, args.steps)
        peer_calls = max(1, args.steps // peer_chunk)
        rates = {"ours": [], "theirs": []}
        for _ in range(args.repeats):
            rates["ours"].append(our_chunk / our_run(1))
            rates["theirs"].append(peer_calls * peer_chunk / peer_run(peer_calls))
        ratio = [o / t for o, t in zip(rates["ours"], rates["theirs"])]
        row = {"algo": algo, "env": args.env, "dataset": args.dataset,
               "transitions": data.size, "ours_steps_per_s": float(np.median(rates["ours"])),
               "theirs_steps_per_s": float(np.median(rates["theirs"])),
               "ratio_median": float(np.median(ratio)), "ratio_min": float(min(ratio)),
               "ratio_max": float(max(ratio)), "repeats": args.repeats,
               "steps_per_round": args.steps}
        rows.append(row)
        print(f"{algo}: ours {row['ours_steps_per_s']:,.0f} steps/s, JAX-CORL "
              f"{row['theirs_steps_per_s']:,.0f} steps/s, ratio {row['ratio_median']:.2f} "
              f"({row['ratio_min']:.2f}-{row['ratio_max']:.2f})", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
