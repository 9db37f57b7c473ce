"""Host-loop throughput: PPO and IMPALA through the host loop beside raw AsyncVectorEnv stepping.

`python benchmarks/bench_host.py` (or `benchmarks/bench.py --sections host`). Both sides use the same
number of worker processes (Gymnasium AsyncVectorEnv, spawn, shared memory, SAME_STEP
autoreset); the raw side steps one vector of them with random actions and nothing else; the
agents run with 1 and 2 actor threads (each thread its own vector of num_envs / threads
workers). Measured alternately in one run; medians over `--repeats`, and ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from typing import Optional


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


def host_steps_per_second(agent_name: str, env_name: str, num_envs: int, iterations: int,
                          staleness: int, threads: int = 1, devices: int = 1,
                          overrides: Optional[dict] = None) -> tuple[float, dict]:
    """Env steps/s of `agent_name` (its defaults for `env_name`, with `overrides`) trained
    through the host loop with `threads` actor threads on `devices` devices (acting and
    learning, compile and worker start-up excluded), and where the actors spent their time
    (mean over threads)."""
    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime import host
    from jaxrl_sys.runtime.host.placement import HostLayout, place_host

    module = agents.load(agent_name)
    env = envs.make_host(env_name)
    config = dataclasses.replace(module.default_config(env_name), num_envs=num_envs,
                                 **(overrides or {}))
    config = dataclasses.replace(config, total_steps=iterations * config.steps_per_iteration)
    fns = module.host_fns(module.make(env, config))
    result = host.train(env, fns, seed=0, num_iterations=config.num_iterations,
                        iters_per_chunk=config.num_iterations,
                        config=host.HostLoopConfig(staleness=staleness),
                        placement=place_host(HostLayout(num_envs, devices=devices,
                                                        actor_threads=threads)))
    steps = config.num_iterations * config.steps_per_iteration
    return steps / result.train_seconds, result.pipeline_seconds


CASES = (("ppo", 1), ("ppo", 2), ("impala", 1), ("impala", 2))  # (agent, actor threads)


def host_table(env_name: str = "gymnasium:CartPole-v1", num_envs: int = 8, repeats: int = 3,
               iterations: int = 20, staleness: int = 1,
               cases: tuple = CASES) -> list[str]:
    """Markdown rows: raw stepping, each agent through the host loop with 1 and 2 actor
    threads, and their ratios to raw (medians of repeats, every case once per repeat)."""
    raw: list[float] = []
    rates: dict = {case: [] for case in cases}
    for _ in range(repeats):
        raw.append(raw_steps_per_second(env_name, num_envs, steps=2000))
        for agent_name, threads in cases:
            rate, _ = host_steps_per_second(agent_name, env_name, num_envs, iterations,
                                            staleness, threads)
            rates[(agent_name, threads)].append(rate)
    raw_rate = statistics.median(raw)
    rows = [
        f"### Host loop: {env_name}, {num_envs} envs in worker processes (median of {repeats})",
        "",
        "| what | actor threads | env-steps/s | ratio to raw |",
        "| --- | ---: | ---: | ---: |",
        f"| raw AsyncVectorEnv, random actions | - | {raw_rate:,.0f} | 1.00 |",
    ]
    for (agent_name, threads), measured in rates.items():
        rate = statistics.median(measured)
        rows.append(f"| {agent_name} through the host loop (staleness {staleness}) | {threads} "
                    f"| {rate:,.0f} | {rate / raw_rate:.2f} |")
    return rows + [""]


def main() -> int:
    from jaxrl_sys.runtime.devices import request_devices

    request_devices(1)  # the same XLA:CPU flags as scripts/train.py
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gymnasium:CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--staleness", type=int, default=1)
    parser.add_argument("--agents", default="ppo,impala", help="comma-separated agents")
    parser.add_argument("--threads", default="1,2", help="comma-separated actor thread counts")
    args = parser.parse_args()
    cases = tuple((agent, int(threads)) for agent in args.agents.split(",")
                  for threads in args.threads.split(","))
    print("\n".join(host_table(args.env, args.num_envs, args.repeats, args.iterations,
                               args.staleness, cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
