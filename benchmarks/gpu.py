"""The accelerator benchmark: `python benchmarks/gpu.py --purejaxrl PATH --out results/gpu.json`.

Measures, on whatever accelerator JAX selects (a CPU too), one section at a time, each in a
process of its own with its own time limit (`--section-limit`), and writes every figure to one
JSON file as soon as its section ends:

- `ppo`: our PPO beside PureJaxRL's `purejaxrl/ppo.py` (and rejax's PPO where `rejax` is
  installed) on CartPole-v1 at each of `--envs`, PureJaxRL's config on both sides (64x64 tanh,
  128 steps per env, 4 epochs of 4 minibatches, lr 2.5e-4 annealed), compiled first and then
  alternated in one process for `--rounds` rounds. Ours is timed on `run_chunk` (its network
  and env reset come from `runner.init`, outside the timed call); PureJaxRL's and rejax's
  `train(rng)` initialise inside, so theirs is the difference between a run of 2U updates and
  one of U, which leaves the initialisation out as ours is. Ours for each `--unrolls` value
  (`rollout_unroll`, which changes speed and never results).
- `agents`: every agent's shipped defaults on its default env: compile seconds and env-steps/s
  (median of 3 chunks after one that fills replay past `learning_starts`).
- `muzero_seeds`: MuZero's Breakout-MinAtar defaults with 1, 2 and 16 seeds in one program:
  aggregate env-steps/s.
- `sweep`: `train.py --sweep` of 64 PPO settings x 4 seeds (256 rows) on CartPole-v1, end to end.
- `host`: benchmarks/bench_host.py (PPO and IMPALA through the host loop, 1 and 4 actor
  threads, beside raw stepping) on this machine's cores.

`python benchmarks/gpu.py --table results/gpu.json` prints the Markdown section that
docs/benchmarks.md holds. PureJaxRL's code is not copied here (purejaxrl_checkout.py loads the
user's checkout); rejax comes from the package index (`pip install rejax`, the `bench` extra).

    python benchmarks/gpu.py --purejaxrl ~/src/purejaxrl --out results/gpu.json
    python benchmarks/gpu.py --purejaxrl ~/src/purejaxrl --sections ppo --envs 64 --updates 2 \\
        --rounds 1 --out /tmp/gpu.json   # a quick run on a CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

SECTIONS = ("ppo", "muzero_seeds", "agents", "ops", "sweep", "host")
AGENTS = ("ppo", "dqn", "sac", "impala", "mappo", "qmix", "muzero")
SWEEP_RATES = "1e-4,2e-4,5e-4,1e-3,2e-3,5e-3,1e-2,2e-2"  # x 8 entropy weights x 4 seeds: 256 rows
SWEEP_ENTROPY = "0,0.001,0.002,0.005,0.01,0.02,0.05,0.1"
ROOT = Path(__file__).resolve().parents[1]
# purejaxrl/ppo.py's `__main__` config but the env count and budget (DEBUG off)
PUREJAXRL_PPO = {
    "LR": 2.5e-4, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh", "ENV_NAME": "CartPole-v1", "ANNEAL_LR": True, "DEBUG": False,
}


def our_ppo(num_envs: int, updates: int, unroll: int) -> Callable[[int], float]:
    """A function timing one compiled chunk of `updates` iterations of our PPO (PureJaxRL's
    config) from a fresh `runner.init(seed)` made outside the timing; returns seconds."""
    from jaxrl_sys import envs
    from jaxrl_sys.agents import ppo
    from jaxrl_sys.runtime.execution import place, placement_fns

    config = dataclasses.replace(
        ppo.default_config("CartPole-v1"), num_envs=num_envs, rollout_steps=128, update_epochs=4,
        num_minibatches=4, learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
        clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, hidden=(64, 64),
        activation="tanh", reward_scale=1.0, clip_value=True, normalize_advantages=True,
        normalize_obs=False, total_steps=updates * 128 * num_envs)
    if unroll:  # 0: the shipped default
        config = dataclasses.replace(config, rollout_unroll=unroll)
    agent = ppo.make(envs.make("CartPole-v1"), config)
    return timed_chunk(place(*placement_fns(agent), num_envs=num_envs, iters_per_chunk=updates))


def timed_chunk(runner: Any) -> Callable[[int], float]:
    """A function timing one call of `runner`'s compiled `run_chunk` (one seed) from a
    `runner.init(seed)` made outside the timing; returns seconds."""
    import jax
    import numpy as np

    run_chunk = runner.run_chunk.lower(runner.init(np.arange(1))).compile()

    def timed(seed: int) -> float:
        carry = jax.block_until_ready(runner.init(np.array([seed])))
        start = time.perf_counter()
        jax.block_until_ready(run_chunk(carry))
        return time.perf_counter() - start

    return timed


def their_difference(build: Callable[[int], Callable[[Any], Any]],
                     updates: int) -> Callable[[int], float]:
    """A function timing a peer's `train(rng)` of 2U updates minus one of U (both compiled
    here by `build(updates)`): U updates' seconds without the peer's in-call initialisation."""
    import jax

    short, long = build(updates), build(2 * updates)

    def timed(seed: int) -> float:
        key = jax.random.PRNGKey(seed)
        start = time.perf_counter()
        jax.block_until_ready(short(key))
        middle = time.perf_counter()
        jax.block_until_ready(long(key))
        return (time.perf_counter() - middle) - (middle - start)

    return timed


def purejaxrl_ppo(checkout: Path, num_envs: int) -> Callable[[int], Callable[[Any], Any]]:
    """`build(updates)`: PureJaxRL's ppo.py `make_train` for `num_envs` envs, compiled."""
    import jax

    from purejaxrl_checkout import load_purejaxrl

    module = load_purejaxrl(checkout, "ppo.py")

    def build(updates: int):
        config = dict(PUREJAXRL_PPO, NUM_ENVS=num_envs,
                      TOTAL_TIMESTEPS=updates * PUREJAXRL_PPO["NUM_STEPS"] * num_envs)
        return jax.jit(module.make_train(config)).lower(jax.random.PRNGKey(0)).compile()

    return build


def rejax_ppo(num_envs: int) -> Callable[[int], Callable[[Any], Any]]:
    """`build(updates)`: rejax's PPO with PureJaxRL's config for `num_envs` envs, compiled,
    evaluation off (rejax's envs step through gymnax 0.0.x's 5-tuple: FiveTupleStep)."""
    import gymnax
    import jax
    from rejax import PPO

    from purejaxrl_checkout import FiveTupleStep

    env, params = gymnax.make("CartPole-v1")

    def build(updates: int):
        algo = PPO.create(
            env=FiveTupleStep(env), env_params=params, num_envs=num_envs, num_steps=128,
            num_epochs=4, num_minibatches=4, learning_rate=2.5e-4, max_grad_norm=0.5,
            gamma=0.99, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5,
            total_timesteps=updates * 128 * num_envs, eval_freq=updates * 128 * num_envs,
            skip_initial_evaluation=True,
            agent_kwargs={"activation": "tanh", "hidden_layer_sizes": (64, 64)})
        return jax.jit(algo.train).lower(jax.random.PRNGKey(0)).compile()

    return build


def section_ppo(args: argparse.Namespace) -> dict:
    """Ours (per unroll), PureJaxRL's and rejax's env-steps/s per env count, alternated."""
    rows = []
    for num_envs in args.envs:
        updates = args.updates or max(8, math.ceil(4_000_000 / (128 * num_envs)))
        steps = updates * 128 * num_envs
        sides: dict[str, Callable[[int], float]] = {}
        compile_start = time.perf_counter()
        sides["purejaxrl"] = their_difference(purejaxrl_ppo(args.purejaxrl, num_envs), updates)
        for unroll in args.unrolls:
            sides[f"ours_unroll{unroll}" if unroll else "ours"] = our_ppo(num_envs, updates,
                                                                          unroll)
        try:
            sides["rejax"] = their_difference(rejax_ppo(num_envs), updates)
        except ImportError as e:
            print(f"# rejax left out: {e}", file=sys.stderr)
        compile_seconds = time.perf_counter() - compile_start
        seconds: dict[str, list[float]] = {name: [] for name in sides}
        for seed in range(args.rounds):
            for name, timed in sides.items():
                seconds[name].append(timed(seed))
        rates = {name: [steps / s for s in each] for name, each in seconds.items()}
        row = {"envs": num_envs, "updates": updates, "env_steps": steps,
               "compile_seconds": compile_seconds, "rates": rates,
               "median": {name: statistics.median(r) for name, r in rates.items()}}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return {"rows": rows}


def section_agents(args: argparse.Namespace) -> dict:
    """Each agent's shipped defaults on its default env: compile seconds, env-steps/s."""
    import jax
    import numpy as np

    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.execution import place, placement_fns

    rows = []
    for name in AGENTS:
        module = agents.load(name)
        config = module.default_config(module.DEFAULT_ENV)
        per_iteration = config.steps_per_iteration
        warm_steps = max(getattr(config, "learning_starts", 0), args.agent_steps)
        iters = max(2, math.ceil(warm_steps / per_iteration))
        agent = module.make(envs.make(module.DEFAULT_ENV), config)
        runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters)
        carry = runner.init(np.arange(1))
        start = time.perf_counter()
        run_chunk = runner.run_chunk.lower(carry).compile()
        compile_seconds = time.perf_counter() - start
        carry, metrics = run_chunk(carry)  # past learning_starts
        jax.block_until_ready(metrics)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            carry, metrics = run_chunk(carry)
            jax.block_until_ready(metrics)
            times.append(time.perf_counter() - start)
        row = {"agent": name, "env": module.DEFAULT_ENV, "envs": config.num_envs,
               "compile_seconds": compile_seconds,
               "env_steps_per_second": iters * per_iteration / statistics.median(times)}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return {"rows": rows}


def section_muzero_seeds(args: argparse.Namespace) -> dict:
    """MuZero's Breakout-MinAtar defaults, 1, 2 and 16 seeds in one program each."""
    import jax
    import numpy as np

    from jaxrl_sys import envs
    from jaxrl_sys.agents import muzero
    from jaxrl_sys.runtime.execution import place, placement_fns

    config = muzero.default_config("Breakout-MinAtar")
    iters = math.ceil(config.learning_starts / config.steps_per_iteration) + 1
    agent = muzero.make(envs.make("Breakout-MinAtar"), config)
    rows = []
    for seeds in args.muzero_seeds:
        runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters)
        carry = runner.init(np.arange(seeds))
        start = time.perf_counter()
        run_chunk = runner.run_chunk.lower(carry).compile()
        compile_seconds = time.perf_counter() - start
        carry, metrics = run_chunk(carry)  # fills replay past learning_starts
        jax.block_until_ready(metrics)
        start = time.perf_counter()
        carry, metrics = run_chunk(carry)
        jax.block_until_ready(metrics)
        seconds = time.perf_counter() - start
        row = {"seeds": seeds, "compile_seconds": compile_seconds, "chunk_seconds": seconds,
               "env_steps_per_second": seeds * iters * config.steps_per_iteration / seconds}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return {"rows": rows}


def section_sweep(args: argparse.Namespace) -> dict:
    """One `train.py --sweep` process of 8 x 8 PPO settings x 4 seeds, wall clock end to end."""
    with tempfile.TemporaryDirectory() as root:
        argv = [sys.executable, str(ROOT / "scripts" / "train.py"), "--agent", "ppo", "--env",
                "CartPole-v1", "--seeds", "4", "--sweep", f"learning_rate={SWEEP_RATES}",
                "--sweep", f"ent_coef={SWEEP_ENTROPY}", "--run-root", root, "--no-progress"]
        if args.sweep_steps:
            argv += ["--total-steps", str(args.sweep_steps)]
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-400:])
    steps = 64 * 4 * _ppo_total_steps(args.sweep_steps)
    return {"rows": 256, "seconds": seconds, "env_steps_per_second": steps / seconds,
            "command": " ".join(argv[1:])}


def _ppo_total_steps(total_steps: int) -> int:
    """The env steps of one PPO row on CartPole-v1: `total_steps` (the shipped budget if 0)
    in whole iterations."""
    from jaxrl_sys.agents import ppo

    config = ppo.default_config("CartPole-v1")
    if total_steps:
        config = dataclasses.replace(config, total_steps=total_steps)
    return config.num_iterations * config.steps_per_iteration


def section_host(args: argparse.Namespace) -> dict:
    """benchmarks/bench_host.py's table with 1 and 4 actor threads on this machine."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "bench_host.py"), "--threads", "1,4",
            "--num-envs", "16", "--repeats", "2"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-400:])
    return {"table": done.stdout.strip(), "cores": os.cpu_count(),
            "command": " ".join(argv[1:])}


def section_ops(args: argparse.Namespace) -> dict:
    """benchmarks/op_counts.py's table (ops per loop body) for the agents it covers."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "op_counts.py")]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-400:])
    return {"table": done.stdout.strip(), "command": " ".join(argv[1:])}


def run_section(args: argparse.Namespace) -> dict:
    """One section in this process, with the device it ran on."""
    import jax

    from jaxrl_sys.runtime.devices import request_devices

    request_devices(1)
    result = globals()[f"section_{args.run_section}"](args)
    device = jax.devices()[0]
    return {**result, "device": getattr(device, "device_kind", device.platform),
            "backend": jax.default_backend(), "jax": jax.__version__}


def table(results: dict) -> str:
    """docs/benchmarks.md's accelerator section from gpu.py's JSON."""
    lines = [f"Measured {results.get('date', '?')} on {results.get('device', '?')} "
             f"(jax {results.get('jax', '?')}): `{results.get('command', '')}`.", ""]
    ppo = results.get("ppo", {})
    for row in ppo.get("rows", []):
        median = row["median"]
        theirs = median["purejaxrl"]
        lines += [f"PPO, CartPole-v1, {row['envs']:,} envs, {row['updates']} updates a call, "
                  f"{len(row['rates']['purejaxrl'])} alternating rounds:", "",
                  "| implementation | median env-steps/s | / PureJaxRL |", "|---|---:|---:|"]
        for name, rate in median.items():
            lines.append(f"| {name} | {rate / 1e6:.2f}M | {rate / theirs:.2f} |")
        lines.append("")
    if "agents" in results:
        lines += ["| agent | env | envs | compile s | env-steps/s |", "|---|---|---:|---:|---:|"]
        lines += [f"| {r['agent']} | {r['env']} | {r['envs']} | {r['compile_seconds']:.1f} | "
                  f"{r['env_steps_per_second']:,.0f} |" for r in results["agents"]["rows"]]
        lines.append("")
    if "muzero_seeds" in results:
        rows = results["muzero_seeds"]["rows"]
        base = {r["seeds"]: r["env_steps_per_second"] for r in rows}.get(2)
        lines += ["| MuZero Breakout-MinAtar seeds | compile s | env-steps/s (all seeds) | "
                  "/ 2 seeds |", "|---:|---:|---:|---:|"]
        lines += [f"| {r['seeds']} | {r['compile_seconds']:.1f} | "
                  f"{r['env_steps_per_second']:,.0f} | "
                  f"{r['env_steps_per_second'] / base if base else float('nan'):.2f} |"
                  for r in rows]
        lines.append("")
    if "sweep" in results:
        s = results["sweep"]
        lines += [f"Sweep of {s['rows']} rows (`{s['command']}`): {s['seconds']:.0f} s end to "
                  f"end, {s['env_steps_per_second']:,.0f} env-steps/s.", ""]
    if "ops" in results:
        lines += [f"Ops per loop body (`{results['ops']['command']}`):", "",
                  results["ops"]["table"], ""]
    if "host" in results:
        h = results["host"]
        lines += [f"Host loop on {h['cores']} cores (`{h['command']}`):", "", h["table"], ""]
    for name, error in results.get("errors", {}).items():
        lines.append(f"- `{name}` did not finish: {error}")
    return "\n".join(lines).rstrip() + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",")]  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--purejaxrl", type=Path, metavar="PATH",
                        help="a checkout of PureJaxRL (git clone "
                             "https://github.com/luchris429/purejaxrl); needed by `ppo`")
    parser.add_argument("--out", type=Path, default=Path("results/gpu.json"))
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--envs", type=ints, default=[1024, 16384])
    parser.add_argument("--updates", type=int, default=0,
                        help="PPO updates a timed call (default: at least 8 and 4M env steps)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--unrolls", type=ints, default=[0, 1],
                        help="our rollout_unroll values (0: the shipped backend default)")
    parser.add_argument("--agent-steps", type=int, default=32_768,
                        help="env steps a timed chunk of `agents`, at least")
    parser.add_argument("--muzero-seeds", type=ints, default=[1, 2, 16])
    parser.add_argument("--sweep-steps", type=int, default=0,
                        help="env steps per row of `sweep` (default: PPO's shipped budget)")
    parser.add_argument("--section-limit", type=float, default=240.0,
                        help="seconds each section may take")
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="seconds all sections may take together (0: no bound)")
    parser.add_argument("--run-section", choices=SECTIONS, help=argparse.SUPPRESS)
    parser.add_argument("--table", type=Path, metavar="JSON",
                        help="print the Markdown section of a results file and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.table:
        if not args.table.is_file():
            print(f"error: --table {args.table}: no such file", file=sys.stderr)
            return 2
        print(table(json.loads(args.table.read_text())), end="")
        return 0
    sections = args.sections.split(",")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown or min(args.envs) < 4 or args.rounds < 1 or min(args.unrolls) < 0:
        print(f"error: sections are {', '.join(SECTIONS)}; --envs >= 4, --rounds >= 1, "
              f"--unrolls >= 0", file=sys.stderr)
        return 2
    if "ppo" in sections:
        from purejaxrl_checkout import UsageError, purejaxrl_folder

        try:
            purejaxrl_folder(args.purejaxrl, "ppo.py")
        except UsageError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.run_section:  # a child process: one section, its JSON on stdout
        print(json.dumps(run_section(args)))
        return 0
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "command": " ".join(sys.argv),
                     "errors": {}}
    began = time.perf_counter()
    for section in sections:
        child = [sys.executable, __file__, "--run-section", section, *(argv or sys.argv[1:])]
        start = time.perf_counter()
        limit = args.section_limit
        if args.deadline:
            limit = min(limit, args.deadline - (start - began))
        if limit <= 5:
            results["errors"][section] = "not started: --deadline reached"
            continue
        try:
            done = subprocess.run(child, capture_output=True, text=True, timeout=limit)
        except subprocess.TimeoutExpired as e:
            results["errors"][section] = f"over its limit of {limit:.0f} s"
            sys.stderr.write((e.stderr or b"").decode(errors="replace")[-3000:])
        else:
            sys.stderr.write(done.stderr[-3000:])
            if done.returncode:
                results["errors"][section] = done.stderr.strip().splitlines()[-1][-300:]
            else:
                result = json.loads(done.stdout.strip().splitlines()[-1])
                for key in ("device", "backend", "jax"):
                    results[key] = result.pop(key)
                results[section] = result
        print(f"# {section}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
