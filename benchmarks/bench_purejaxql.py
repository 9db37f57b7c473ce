"""PQN beside purejaxql's PQN on a MinAtar game, side by side in one process (issue 52):
`python benchmarks/bench_purejaxql.py --purejaxql PATH [--env Breakout-MinAtar] --out JSON`.

purejaxql's `purejaxql/pqn_minatar.py` runs unchanged from the user's checkout (get one with
`git clone https://github.com/mttga/purejaxql`); none of its code is copied here. It was
written for gymnax 0.0.x, so its `LogWrapper` is bound to gymnax 1.x's wrapped in
`FiveTupleStep` (done = terminated or truncated), and the hydra, omegaconf and wandb it imports
at its top for its command line are empty stand-ins while it loads (its `train` uses none of
them with logging off).

Both sides run purejaxql's `pqn_minatar.yaml`: 128 envs x 32 steps per update, 2 epochs of 32
minibatches, lr 5e-4 annealed, lambda 0.65, gamma 0.99, epsilon to 0.05, gradients clipped at
10, one Dense of 128 after a 3x3 conv of 16 with LayerNorm; their in-training tests off. What
differs by construction: our conv pads 'SAME' (10x10x16 features, theirs 'VALID' 8x8x16) with
no LayerNorm after it, our optimiser is Adam (theirs RAdam), and our minibatches are permuted
within each env's steps. Ours is timed on one compiled chunk of `--updates` iterations from a
`runner.init` made outside the timing; their `train(rng)` initialises inside, so theirs is a
run of 2U updates minus one of U (benchmarks/gpu.py's `their_difference`). The compiled
programs are alternated for `--rounds` rounds; the table gives medians and our ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any, Callable

from gpu import their_difference, timed_chunk
from purejaxrl_checkout import FiveTupleStep, UsageError, load_file

GET_PUREJAXQL = "git clone https://github.com/mttga/purejaxql"
# imported at pqn_minatar.py's top for its command line and logging, unused by `make_train`
STAND_INS = ("hydra", "omegaconf", "wandb")
# purejaxql/config/alg/pqn_minatar.yaml (the env and budget set per run; tests off)
PUREJAXQL_MINATAR = {
    "NUM_ENVS": 128, "NUM_STEPS": 32, "EPS_START": 1.0, "EPS_FINISH": 0.05, "EPS_DECAY": 0.1,
    "NUM_MINIBATCHES": 32, "NUM_EPOCHS": 2, "NORM_TYPE": "layer_norm", "LR": 5e-4,
    "MAX_GRAD_NORM": 10, "LR_LINEAR_DECAY": True, "GAMMA": 0.99, "LAMBDA": 0.65,
    "ENV_KWARGS": {}, "TEST_DURING_TRAINING": False, "WANDB_MODE": "disabled",
    "TOTAL_TIMESTEPS_DECAY": 10_000_000,
}


def pqn_file(checkout: Path | None) -> Path:
    """`pqn_minatar.py` in a checkout's root, its `purejaxql/` folder, or that file itself."""
    if checkout is None:
        raise UsageError(f"purejaxql's side needs --purejaxql PATH, a checkout of it "
                         f"({GET_PUREJAXQL})")
    for candidate in (checkout / "purejaxql" / "pqn_minatar.py", checkout / "pqn_minatar.py",
                      checkout):
        if candidate.is_file() and candidate.name == "pqn_minatar.py":
            return candidate
    raise UsageError(f"--purejaxql {checkout}: no purejaxql/pqn_minatar.py there (get a "
                     f"checkout with `{GET_PUREJAXQL}`)")


def _hydra_stand_in() -> types.ModuleType:
    """`hydra` with a `main(...)` decorator that leaves the function as it is."""
    hydra = types.ModuleType("hydra")
    hydra.main = lambda *args, **kwargs: (lambda fn: fn)
    return hydra


def load_purejaxql(checkout: Path | None) -> types.ModuleType:
    """purejaxql's pqn_minatar.py as a module, its `LogWrapper` seeing gymnax 1.x envs through
    the 5-tuple step it unpacks."""
    from gymnax.wrappers.purerl import LogWrapper

    path = pqn_file(checkout)
    saved = {name: sys.modules.get(name) for name in STAND_INS}
    try:
        sys.modules["hydra"] = _hydra_stand_in()
        sys.modules["omegaconf"] = types.ModuleType("omegaconf")
        sys.modules["omegaconf"].OmegaConf = None
        sys.modules["wandb"] = types.ModuleType("wandb")
        module = load_file("purejaxql_pqn_minatar", path,
                           needs="purejaxql's PQN needs gymnax, flax, optax and chex")
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous
    module.LogWrapper = lambda env: FiveTupleStep(LogWrapper(env))
    return module


def purejaxql_pqn(checkout: Path | None, env_name: str) -> Callable[[int], Callable[[Any], Any]]:
    """`build(updates)`: purejaxql's `make_train` for `env_name`, compiled."""
    import jax

    module = load_purejaxql(checkout)
    per_update = PUREJAXQL_MINATAR["NUM_ENVS"] * PUREJAXQL_MINATAR["NUM_STEPS"]

    def build(updates: int):
        config = dict(PUREJAXQL_MINATAR, ENV_NAME=env_name, TOTAL_TIMESTEPS=updates * per_update)
        return jax.jit(module.make_train(config)).lower(jax.random.PRNGKey(0)).compile()

    return build


def our_pqn(env_name: str, updates: int) -> Callable[[int], float]:
    """A function timing one compiled chunk of `updates` iterations of our PQN (the shipped
    MinAtar entry with purejaxql's one Dense of 128) from a `runner.init(seed)` made outside
    the timing; returns seconds."""
    from jaxrl_sys import envs
    from jaxrl_sys.agents import pqn
    from jaxrl_sys.runtime.execution import place, placement_fns

    config = pqn.default_config(env_name)
    config = dataclasses.replace(config, hidden=(128,),
                                 total_steps=updates * config.num_envs * config.rollout_steps)
    agent = pqn.make(envs.make(env_name), config)
    return timed_chunk(place(*placement_fns(agent), num_envs=config.num_envs,
                             iters_per_chunk=updates))


def measure(args: argparse.Namespace) -> dict:
    """Both sides compiled, then alternated for `args.rounds` rounds: env-steps/s each round."""
    import jax

    steps = args.updates * PUREJAXQL_MINATAR["NUM_ENVS"] * PUREJAXQL_MINATAR["NUM_STEPS"]
    compile_start = time.perf_counter()
    sides = {"purejaxql": their_difference(purejaxql_pqn(args.purejaxql, args.env), args.updates),
             "ours": our_pqn(args.env, args.updates)}
    compile_seconds = time.perf_counter() - compile_start
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for seed in range(args.rounds):
        for name, timed in sides.items():
            rates[name].append(steps / timed(seed))
        print(json.dumps({"round": seed, **{k: v[-1] for k, v in rates.items()}}),
              file=sys.stderr, flush=True)
    median = {name: statistics.median(r) for name, r in rates.items()}
    ratios = [ours / theirs for ours, theirs in zip(rates["ours"], rates["purejaxql"])]
    return {"env": args.env, "updates": args.updates, "env_steps": steps,
            "rounds": args.rounds, "backend": jax.default_backend(),
            "device": str(jax.devices()[0].device_kind), "compile_seconds": compile_seconds,
            "rates": rates, "median": median, "ratio_median": statistics.median(ratios),
            "ratio_range": [min(ratios), max(ratios)]}


def table(result: dict) -> str:
    """The Markdown rows docs/benchmarks.md holds."""
    med = result["median"]
    low, high = result["ratio_range"]
    return "\n".join([
        "| env | updates x env steps | purejaxql | jaxrl_sys | ratio (range) |",
        "|---|---:|---:|---:|---:|",
        f"| {result['env']} | {result['updates']} x 4,096 | {med['purejaxql']:,.0f} | "
        f"{med['ours']:,.0f} | **{result['ratio_median']:.2f}** ({low:.2f}-{high:.2f}) |"])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--purejaxql", type=Path, help=f"a checkout ({GET_PUREJAXQL})")
    parser.add_argument("--env", default="Breakout-MinAtar",
                        help="a MinAtar game (default Breakout-MinAtar)")
    parser.add_argument("--updates", type=int, default=8,
                        help="updates per timed call (4,096 env steps each)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, help="write the figures to this JSON file")
    return parser.parse_args(argv)


def check(args: argparse.Namespace) -> None:
    """Refuse bad input before anything is compiled or written (UsageError, one line)."""
    if not args.env.endswith("-MinAtar"):
        raise UsageError(f"--env must be a MinAtar game (purejaxql's pqn_minatar.py), got "
                         f"{args.env}")
    if args.updates < 1 or args.rounds < 1:
        raise UsageError("--updates and --rounds must be at least 1")
    pqn_file(args.purejaxql)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        check(args)
        result = measure(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
