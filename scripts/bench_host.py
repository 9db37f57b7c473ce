"""Host-loop throughput: PPO through the host loop beside raw AsyncVectorEnv stepping.

`python scripts/bench_host.py` (or `scripts/bench.py --sections host`). Both sides use the same
worker processes (Gymnasium AsyncVectorEnv, spawn, shared memory, SAME_STEP autoreset); the
raw side steps them with random actions and nothing else. Measured alternately in one run;
medians over `--repeats`, and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time


def raw_steps_per_second(env_name: str, num_envs: int, steps: int) -> float:
    """Env steps/s of `num_envs` envs of host-loop env `env_name` (worker processes or envpool)
    stepped with uniformly random actions through the host loop's vector interface."""
    import numpy as np

    from jaxrl_sys import envs
    from jaxrl_sys.core.types import Discrete

    env = envs.make_host(env_name)
    space = env.spec.action_space
    rng = np.random.default_rng(0)
    if isinstance(space, Discrete):
        actions = [rng.integers(0, space.n, num_envs) for _ in range(64)]
    else:
        actions = [rng.uniform(space.low, space.high, (num_envs, *space.shape))
                   for _ in range(64)]
    actions = [env.decode_actions(a) for a in actions]
    vector = env.make_vector(num_envs, "spawn")
    try:
        vector.reset_async(seed=0)
        vector.reset_wait()

        def step(t: int) -> None:
            vector.step_async(actions[t % 64])
            vector.step_wait()

        for t in range(100):  # warm-up
            step(t)
        start = time.perf_counter()
        for t in range(steps):
            step(t)
        return num_envs * steps / (time.perf_counter() - start)
    finally:
        vector.close()


def host_ppo_steps_per_second(env_name: str, num_envs: int, iterations: int,
                              staleness: int) -> tuple[float, dict]:
    """Env steps/s of PPO trained through the host loop (acting and learning, compile and
    worker start-up excluded), and where the actor spent its time."""
    from jaxrl_sys import envs
    from jaxrl_sys.agents import ppo
    from jaxrl_sys.runtime import host_loop

    env = envs.make_host(env_name)
    config = dataclasses.replace(ppo.default_config(env_name), num_envs=num_envs)
    config = dataclasses.replace(config, total_steps=iterations * config.steps_per_iteration)
    fns = ppo.host_fns(ppo.make(env, config, axis_name=None))
    result = host_loop.train(env, fns, seed=0, num_iterations=config.num_iterations,
                             iters_per_chunk=config.num_iterations,
                             config=host_loop.HostLoopConfig(staleness=staleness))
    steps = config.num_iterations * config.steps_per_iteration
    return steps / result.train_seconds, result.pipeline_seconds


def host_table(env_name: str = "gymnasium:CartPole-v1", num_envs: int = 8, repeats: int = 3,
               iterations: int = 20, staleness: int = 1) -> list[str]:
    """Markdown rows: raw stepping, host-loop PPO, ratio (medians of alternating repeats)."""
    raw, host, actor = [], [], []
    for _ in range(repeats):
        raw.append(raw_steps_per_second(env_name, num_envs, steps=2000))
        rate, seconds = host_ppo_steps_per_second(env_name, num_envs, iterations, staleness)
        host.append(rate)
        actor.append(seconds)
    raw_rate, host_rate = statistics.median(raw), statistics.median(host)
    spent = {k: statistics.median(s[k] for s in actor) for k in actor[0]}
    detail = ", ".join(f"{k} {v:.1f} s" for k, v in spent.items())
    return [
        f"### Host loop: {env_name}, {num_envs} worker processes (median of {repeats})",
        "",
        "| what | env-steps/s |",
        "| --- | ---: |",
        f"| raw AsyncVectorEnv, random actions | {raw_rate:,.0f} |",
        f"| PPO through the host loop (staleness {staleness}) | {host_rate:,.0f} |",
        f"| ratio | {host_rate / raw_rate:.2f} |",
        "",
        f"Host-loop time split (median): {detail}.",
        "",
    ]


def main() -> int:
    from jaxrl_sys.runtime.devices import request_devices

    request_devices(1)  # the same XLA:CPU flags as scripts/train.py
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gymnasium:CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--staleness", type=int, default=1)
    args = parser.parse_args()
    print("\n".join(host_table(args.env, args.num_envs, args.repeats, args.iterations,
                               args.staleness)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
