"""Fingerprints of every learning-check case, for showing that a refactor keeps runs bit for bit.

    taskset -c 0 python benchmarks/fingerprint.py > after.jsonl
    PYTHONPATH=/path/to/old/checkout taskset -c 0 python benchmarks/fingerprint.py > before.jsonl
    python benchmarks/fingerprint.py --compare before.jsonl after.jsonl

Each case (every registered agent's promises, device loop only) trains its shipped config for a
few iterations past its warm-up, one seed, under a plain `jit` of a `lax.scan` over
`train_step`, and prints one JSON line: the case, the iterations, and SHA-256 prefixes of the
final learner state and of the metrics of every iteration. Pin the process to one core
(`taskset -c 0`): XLA's CPU code splits some operations by the number of threads it has, which
changes the last bits of a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

MAX_ITERATIONS = 200
ITERATIONS_AFTER_WARMUP = 6


def digest(tree: Any) -> str:
    """The first 16 hex digits of SHA-256 over every leaf's bytes."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(tree):
        h.update(np.asarray(leaf).tobytes())
    return h.hexdigest()[:16]


def fingerprint(agent_name: str, env_name: str, overrides: Sequence[tuple[str, Any]]) -> dict:
    """Train the case for a few iterations after its warm-up and hash what it ends with."""
    from jaxrl_sys import agents, envs

    module = agents.load(agent_name)
    config = dataclasses.replace(module.default_config(env_name), **dict(overrides))
    agent = module.make(envs.make(env_name), config, axis_name=None)
    warmup = getattr(config, "learning_starts", 0)  # on-policy configs have none
    iters = min(math.ceil(warmup / config.steps_per_iteration) + ITERATIONS_AFTER_WARMUP,
                MAX_ITERATIONS)

    def body(carry, key):
        state, env_state = carry
        state, env_state, metrics = agent.train_step(state, env_state, key)
        return (state, env_state), metrics

    state = agent.init(jax.random.PRNGKey(3))
    env_state = agent.init_envs(jax.random.PRNGKey(4), jnp.arange(config.num_envs))
    keys = jax.random.split(jax.random.PRNGKey(5), iters)
    (state, _), metrics = jax.jit(lambda s, e: jax.lax.scan(body, (s, e), keys))(state, env_state)
    return {"case": f"{agent_name}:{env_name}", "iters": iters, "state": digest(state),
            "metrics": digest(metrics)}


def compare(before: str, after: str) -> int:
    """Print each case's verdict; exit code 1 if any case differs or is missing."""
    def load(path: str) -> dict[str, dict]:
        with open(path, encoding="utf-8") as f:
            return {row["case"]: row for row in map(json.loads, f) if "case" in row}

    old, new = load(before), load(after)
    differ = 0
    for case in sorted(set(old) | set(new)):
        a, b = old.get(case), new.get(case)
        same = a is not None and b is not None and a == b
        differ += not same
        print(f"{case}: {'identical' if same else 'DIFFERENT' if a and b else 'missing'}")
    return 1 if differ else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="agent:env cases (default: every promise)")
    parser.add_argument("--shipped", action="store_true",
                        help="train each case's shipped config, leaving out its promise's "
                             "overrides (a promise's budget may differ between the commits "
                             "compared while the shipped defaults do not)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                        help="compare two fingerprint files instead of training")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    from jaxrl_sys import agents, envs

    for name, promises in agents.promises().items():
        for promise in promises:
            case = f"{name}:{promise.env}"
            if envs.is_host_env(promise.env) or (args.cases and case not in args.cases):
                continue
            overrides = () if args.shipped else promise.overrides
            print(json.dumps(fingerprint(name, promise.env, overrides)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
