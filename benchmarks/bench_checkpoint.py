"""Checkpoint save/restore time and size: `python benchmarks/bench_checkpoint.py`.

For each agent's default config (one seed, one device): the run's whole carry as train.py
saves it after a chunk, with and without replay where the agent has one, after training long
enough to fill the replay (an empty buffer compresses to nothing; MuZero: 10k steps, its
self-play is slow). Median of `--repeats` saves and restores into a fresh run directory each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time


def trained_carry(agent_name: str):
    """The default config's carry after enough iterations to fill its replay, and the steps."""
    import jax
    import numpy as np

    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime.execution import place, placement_fns

    module = agents.load(agent_name)
    config = module.default_config(module.DEFAULT_ENV)
    agent = module.make(envs.make(module.DEFAULT_ENV), config)
    buffer = getattr(config, "buffer_size", 0) if agent_name != "muzero" else 10_000
    iterations = min(config.num_iterations, max(1, -(-buffer // config.steps_per_iteration)))
    runner = place(*placement_fns(agent), num_envs=config.num_envs,
                   iters_per_chunk=iterations)
    carry, _ = runner.run_chunk(runner.init(np.arange(1)))
    jax.block_until_ready(carry)
    return carry, iterations * config.steps_per_iteration


def measure(carry, repeats: int, save_replay: bool) -> tuple[float, float, int]:
    """(median save seconds, median restore seconds, bytes) of one carry."""
    import jax

    from jaxrl_sys.runtime.checkpoint import Checkpointer

    saves, restores, size = [], [], 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as run_dir:
            checkpointer = Checkpointer(run_dir, save_replay=save_replay)
            saves.append(checkpointer.save(0, carry, {}))
            size = checkpointer.size_bytes()
            start = time.perf_counter()
            restored, _ = checkpointer.restore(carry)
            jax.block_until_ready(restored)
            restores.append(time.perf_counter() - start)
            checkpointer.close()
    return statistics.median(saves), statistics.median(restores), size


def checkpoint_table(repeats: int = 3) -> list[str]:
    rows = ["| agent (default config) | after env steps | replay | size | save | restore |",
            "|---|---:|---|---:|---:|---:|"]
    for agent_name, replay_options in (("ppo", (True,)), ("dqn", (True, False)),
                                       ("sac", (True, False)), ("muzero", (True, False))):
        carry, steps = trained_carry(agent_name)
        for save_replay in replay_options:
            save, restore, size = measure(carry, repeats, save_replay)
            what = "n/a" if agent_name == "ppo" else "saved" if save_replay else "left out"
            rows.append(f"| {agent_name} | {steps:,} | {what} | {size / 1e6:.2f} MB | "
                        f"{save * 1e3:.0f} ms | {restore * 1e3:.0f} ms |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from jaxrl_sys.runtime.devices import request_devices

    request_devices(1)
    print("\n".join(checkpoint_table(args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
