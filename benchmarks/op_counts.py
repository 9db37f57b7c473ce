"""Compiled ops per loop body of each agent's training chunk, as a Markdown table:
`python benchmarks/op_counts.py [--agents ppo dqn ...] [--env ENV] [--num-envs N]`.

Each agent's shipped defaults for its default env (or `--env`) are placed on one device as
`scripts/train.py` places them, one training iteration per chunk, and compiled for the
backend at hand; `jaxrl_sys.tools.op_counts` then counts the ops XLA kept in every loop body
(a rollout step, a minibatch step, a search simulation...). On a GPU an op is about a kernel
launch, so these counts are what a loop body costs there before any arithmetic.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Optional, Sequence

AGENTS = ("ppo", "dqn", "sac", "impala", "mappo", "muzero")


def agent_loops(agent_name: str, env_name: Optional[str], num_envs: Optional[int]) -> list:
    """(program name, LoopBody) rows of one agent's compiled one-iteration chunk."""
    import numpy as np

    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.execution import place, placement_fns
    from jaxrl_sys.tools import op_counts

    module = agents.load(agent_name)
    env_name = env_name or module.DEFAULT_ENV
    config = module.default_config(env_name)
    if num_envs is not None:
        config = dataclasses.replace(config, num_envs=num_envs)
    agent = module.make(envs.make(env_name), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=1)
    text = runner.run_chunk.lower(runner.init(np.arange(1))).compiled_text()
    name = f"{agent_name} {env_name} ({config.num_envs} envs)"
    rows = [(name, loop) for loop in op_counts.loop_bodies(text)]
    print(f"{name}: {op_counts.program_ops(text)} ops outside loops, {len(rows)} loops",
          file=sys.stderr, flush=True)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS))
    parser.add_argument("--env", default=None, help="one env for every agent (default: each "
                                                    "agent's own default env)")
    parser.add_argument("--num-envs", type=int, default=None)
    args = parser.parse_args(argv)

    import jax

    from jaxrl_sys.tools import op_counts

    rows = []
    for name in args.agents:
        rows += agent_loops(name, args.env, args.num_envs)
    device = jax.devices()[0]
    print(f"Ops per loop body on {device.platform.upper()} ({device.device_kind}), jax "
          f"{jax.__version__}:\n")
    print("\n".join(op_counts.markdown_table(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
