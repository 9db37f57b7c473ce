"""An agent's training throughput at two commits, measured alternately on this machine:
`python benchmarks/bench_commits.py --baseline REV`.

Each measurement is a fresh process that imports jaxrl_sys from one tree (the baseline
commit exported to a temporary directory, or this working tree), builds the agent with that
tree's shipped defaults for the env, runs one untimed chunk (compilation and the replay's
warm-up) and then times `--iters` iterations of acting and learning. The two trees take
turns for `--rounds` rounds, so load on a shared machine falls on both alike; the table
gives every round, the medians and their ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# runs in the measured tree's own interpreter state: only API both trees have
MEASURE = """
import sys, time
import jax, numpy as np
from jaxrl_sys import agents, envs
from jaxrl_sys.runtime.execution import place, placement_fns
agent_name, env_name, iters = sys.argv[1], sys.argv[2], int(sys.argv[3])
module = agents.load(agent_name)
config = module.default_config(env_name)
agent = module.make(envs.make(env_name), config)
warmup = max(iters, config.learning_starts // config.steps_per_iteration + 1)
warm = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=warmup)
carry, metrics = warm.run_chunk(warm.init(np.arange(1)))
jax.block_until_ready(metrics)
timed = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters)
run = timed.run_chunk.lower(carry).compile()
carry, metrics = run(carry)
jax.block_until_ready(metrics)
start = time.perf_counter()
carry, metrics = run(carry)
jax.block_until_ready(metrics)
print(iters * config.steps_per_iteration / (time.perf_counter() - start))
"""


def export_tree(rev: str, into: Path) -> str:
    """Write commit `rev` of this repository into `into`; its full hash."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                            capture_output=True, text=True)
    if commit.returncode:
        raise SystemExit(f"error: --baseline {rev!r} is not a commit of this repository")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit.stdout.strip()],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit.stdout.strip()


def measure(tree: Path, agent: str, env: str, iters: int) -> float:
    """Env steps per second of one fresh process importing jaxrl_sys from `tree`."""
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", MEASURE, agent, env, str(iters)],
                          capture_output=True, text=True, cwd=tree, env=environment)
    if done.returncode:
        raise SystemExit(f"error: measuring {tree} failed: "
                         f"{done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare against")
    parser.add_argument("--agent", default="muzero")
    parser.add_argument("--env", default="Breakout-MinAtar")
    parser.add_argument("--iters", type=int, default=100, help="timed iterations per process")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.iters < 1 or args.rounds < 1:
        print("error: --iters and --rounds must be >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        baseline_tree = Path(scratch)
        commit = export_tree(args.baseline, baseline_tree)
        rates: dict[str, list[float]] = {"baseline": [], "current": []}
        for _ in range(args.rounds):
            rates["baseline"].append(measure(baseline_tree, args.agent, args.env, args.iters))
            rates["current"].append(measure(REPO, args.agent, args.env, args.iters))
            print(f"round: baseline {rates['baseline'][-1]:,.0f}, current "
                  f"{rates['current'][-1]:,.0f} env-steps/s", file=sys.stderr, flush=True)
    print(f"| {args.agent} on {args.env}, shipped defaults | baseline {commit[:7]} | this tree "
          "| this tree / baseline |")
    print("|---|---:|---:|---:|")
    for i, (old, new) in enumerate(zip(rates["baseline"], rates["current"]), 1):
        print(f"| round {i} | {old:,.0f} | {new:,.0f} | {new / old:.2f} |")
    old, new = (statistics.median(rates[k]) for k in ("baseline", "current"))
    print(f"| median | {old:,.0f} | {new:,.0f} | **{new / old:.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
