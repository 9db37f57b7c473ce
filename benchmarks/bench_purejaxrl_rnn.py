"""Our recurrent PPO beside PureJaxRL's ppo_rnn.py: `python benchmarks/bench_purejaxrl_rnn.py`.

Both train CartPole-v1 with PureJaxRL's `ppo_rnn.py` config (4 envs x 128 steps, 4 epochs of
4 minibatches, lr 2.5e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, value 0.5,
grad norm 0.5; Dense 128 relu -> GRU 128 -> actor and critic Dense 128 each), in one process
under the same XLA:CPU flags as train.py, alternately (ours, theirs, ours, theirs, ...) for
`--repeats` rounds. Theirs is `make_train` from `purejaxrl/ppo_rnn.py` of the user's PureJaxRL
checkout (`--purejaxrl PATH`; see below); ours is
`ppo.make(envs.make("CartPole-v1"), config)` placed on one device as benchmarks/bench.py does
(`runtime.execution.place`), the whole budget in one compiled call. Each is compiled once
first (`lower(...).compile()`), so a timed run is a whole training run without compilation:
ours `runner.init` + one `run_chunk`, theirs one `train(rng)` (which also initialises).
Round i trains seed i on both sides. Both run the same number of iterations,
total_steps // 512 (PureJaxRL rounds its update count down; 500,000 steps are 976
iterations, 499,712 env steps).

Prints a markdown table: median env-steps/s (wall clock) and each round's figure, the ratio
ours/theirs, the median env-steps per CPU-second of the process (`time.process_time`: less
moved than the wall clock by other jobs on the cores, though not immune) and its ratio, and
each run's final training return (the mean return of the episodes that ended in the run's
last 10 iterations), so both are seen to learn. The 1-minute load average before and after
is printed above the table: other work on the machine slows both sides' wall-clock rates.

PureJaxRL's code is not copied here: `--purejaxrl PATH` is a checkout of it
(`git clone https://github.com/luchris429/purejaxrl`; commit 31756b1 when docs/benchmarks.md's
table was made; its ppo_rnn.py needs `distrax`, `pip install distrax`). Its `purejaxrl/ppo_rnn.py`
and `purejaxrl/wrappers.py` are loaded unchanged with importlib. They were written for gymnax
0.0.x and flax < 0.7.1, so two names in the loaded module are bound to adapters of ours:
`gymnax` to one whose `make` hands back the gymnax 1.x env behind the old 5-tuple step (done =
terminated or truncated, which is what their `done` meant), and `nn` to flax.linen with a
`GRUCell` taking the old call forms (width from the default 128 that ppo_rnn.py hard-codes, the
static `initialize_carry(key, batch_dims, size)`). wrappers.py imports brax and navix at its top
for wrappers ppo_rnn.py does not use; empty stand-ins take their place while it loads.

    python benchmarks/bench_purejaxrl_rnn.py --purejaxrl ~/src/purejaxrl --repeats 5
    python benchmarks/bench_purejaxrl_rnn.py --repeats 1 --total-steps 50000 --memory lstm
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import types
from pathlib import Path

from purejaxrl_checkout import GET_PUREJAXRL, UsageError, load_purejaxrl

LAST_ITERATIONS = 10  # the final training return: episodes that ended in these iterations
# purejaxrl/ppo_rnn.py's `__main__` config (DEBUG off: no per-episode prints)
PUREJAXRL_CONFIG = {
    "LR": 2.5e-4, "NUM_ENVS": 4, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 5e5, "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01,
    "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5, "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True,
    "DEBUG": False,
}


def our_config(total_steps: int, memory: str):
    """Our PPO config equal to PureJaxRL's ppo_rnn.py config (its choices where ours differ by
    default: no reward scaling, clipped value loss)."""
    from jaxrl_sys.agents import ppo

    return dataclasses.replace(
        ppo.default_config("CartPole-v1"), num_envs=4, rollout_steps=128, update_epochs=4,
        num_minibatches=4, learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
        clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, hidden=(128,),
        activation="relu", memory=memory, memory_size=128, total_steps=total_steps,
        # PureJaxRL: raw rewards, value loss clipped by CLIP_EPS, advantages normalised per
        # minibatch (ours too: normalize_advantages=True), no observation normalisation
        reward_scale=1.0, clip_value=True, normalize_advantages=True, normalize_obs=False,
    )


def build_ours(total_steps: int, memory: str):
    """A function training one seed of our PPO for the whole budget (compiled here), which
    returns the final training return."""
    import jax
    import numpy as np

    from jaxrl_sys import envs
    from jaxrl_sys.agents import ppo
    from jaxrl_sys.runtime.execution import place, placement_fns

    config = our_config(total_steps, memory)
    agent = ppo.make(envs.make("CartPole-v1"), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs,
                   iters_per_chunk=config.num_iterations, num_devices=1)
    carry = runner.init(np.arange(1))  # compiles init
    run_chunk = runner.run_chunk.lower(carry).compile()

    def train(seed: int) -> float:
        _, metrics = run_chunk(runner.init(np.array([seed])))
        metrics = jax.block_until_ready(metrics)
        returns = np.asarray(metrics["episode_return_sum"])[0, -LAST_ITERATIONS:].sum()
        count = np.asarray(metrics["episode_count"])[0, -LAST_ITERATIONS:].sum()
        return float(returns / max(count, 1.0))

    return train, config.num_iterations * config.steps_per_iteration


def build_theirs(total_steps: int, ppo_rnn: types.ModuleType):
    """PureJaxRL's `make_train` (from `load_purejaxrl`) for the same budget, compiled here; the
    same kind of function as `build_ours`."""
    import jax
    import numpy as np

    config = dict(PUREJAXRL_CONFIG, TOTAL_TIMESTEPS=total_steps)
    train_fn = jax.jit(ppo_rnn.make_train(config))
    compiled = train_fn.lower(jax.random.PRNGKey(0)).compile()
    steps = int(config["NUM_UPDATES"]) * config["NUM_STEPS"] * config["NUM_ENVS"]

    def train(seed: int) -> float:
        metric = jax.block_until_ready(compiled(jax.random.PRNGKey(seed))["metric"])
        returns = np.asarray(metric["returned_episode_returns"])[-LAST_ITERATIONS:]
        ended = np.asarray(metric["returned_episode"])[-LAST_ITERATIONS:]
        return float(returns[ended].mean()) if ended.any() else float("nan")

    return train, steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="alternating rounds")
    parser.add_argument("--total-steps", type=int, default=500_000,
                        help="env steps per run (rounded down to whole iterations of 512)")
    parser.add_argument("--memory", choices=("gru", "lstm"), default="gru",
                        help="our recurrent core; PureJaxRL's is a GRU, so lstm runs ours only")
    parser.add_argument("--purejaxrl", type=Path, metavar="PATH",
                        help=f"a checkout of PureJaxRL ({GET_PUREJAXRL}); needed unless "
                             "--memory lstm")
    args = parser.parse_args()
    if args.repeats < 1 or args.total_steps < 512:
        print("error: --repeats must be >= 1 and --total-steps >= 512", file=sys.stderr)
        return 2
    try:
        ppo_rnn = load_purejaxrl(args.purejaxrl) if args.memory == "gru" else None
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    total_steps = args.total_steps // 512 * 512  # whole iterations, the same on both sides

    from jaxrl_sys.runtime.devices import describe, request_devices

    request_devices(1)  # train.py's XLA:CPU flags, for both sides
    import jax

    load_before = os.getloadavg()
    ours_name, theirs_name = f"jaxrl_sys ppo, memory={args.memory}", "PureJaxRL ppo_rnn.py"
    sides = {ours_name: build_ours(total_steps, args.memory)}
    if args.memory == "gru":
        sides[theirs_name] = build_theirs(total_steps, ppo_rnn)
    print(f"# compiled; {describe()}, jax {jax.__version__}, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"load {load_before[0]:.2f}", file=sys.stderr, flush=True)

    rates: dict[str, list[float]] = {name: [] for name in sides}
    cpu_rates: dict[str, list[float]] = {name: [] for name in sides}
    finals: dict[str, list[float]] = {name: [] for name in sides}
    for seed in range(args.repeats):
        for name, (train, steps) in sides.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            final = train(seed)
            seconds = time.perf_counter() - start
            cpu_seconds = time.process_time() - cpu_start
            rates[name].append(steps / seconds)
            cpu_rates[name].append(steps / cpu_seconds)
            finals[name].append(final)
            print(f"round {seed + 1}: {name}: {steps / seconds:,.0f} env-steps/s "
                  f"({seconds:.1f} s, {cpu_seconds:.1f} CPU s), final return {final:.1f}, "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()

    print(f"CartPole-v1, {args.memory.upper()} 128, {total_steps:,} env steps per run, "
          f"{args.repeats} alternating rounds; load average (1 min) {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after\n")
    print("| implementation | median env-steps/s | each run (env-steps/s) | ours / theirs | "
          "median env-steps per CPU-second | ours / theirs (CPU) | "
          f"final training return (each run, last {LAST_ITERATIONS} iterations) |")
    print("|---|---:|---|---:|---:|---:|---|")
    medians = {name: statistics.median(r) for name, r in rates.items()}
    cpu_medians = {name: statistics.median(r) for name, r in cpu_rates.items()}
    for name in sides:
        ratio = cpu_ratio = ""
        if theirs_name in sides and name == ours_name:
            ratio = f"**{medians[name] / medians[theirs_name]:.2f}**"
            cpu_ratio = f"**{cpu_medians[name] / cpu_medians[theirs_name]:.2f}**"
        each = ", ".join(f"{r:,.0f}" for r in rates[name])
        final = ", ".join(f"{f:.1f}" for f in finals[name])
        print(f"| {name} | {medians[name]:,.0f} | {each} | {ratio} | {cpu_medians[name]:,.0f} | "
              f"{cpu_ratio} | {final} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
