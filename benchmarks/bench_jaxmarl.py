"""Our multi-agent agents beside JaxMARL's own baselines: `python benchmarks/bench_jaxmarl.py`.

Two pairs on `MPE_simple_spread_v3` (3 agents, 25-step episodes), each trained with the config
of JaxMARL's script on both sides, in one process under the same XLA:CPU flags as train.py,
alternately (ours, theirs, ours, theirs, ...) for `--repeats` rounds; round i trains seed i on
both sides. Each side is compiled once first (`lower(...).compile()`), so a timed run is one
whole training run of the budget without compilation: ours `runner.init` + one `run_chunk`
(`runtime.execution.place` on one device, as benchmarks/bench.py does), theirs one call of their
`make_train(config)` jitted (which also initialises).

- `ippo`: ours `ippo` (`jaxrl_sys.agents.mappo.ippo`, MAPPO with `critic="local"`) beside
  baselines/IPPO/ippo_ff_mpe.py with config/ippo_ff_mpe.yaml: 16 envs x 128 steps, 4 epochs
  of 4 minibatches, lr 2.5e-4 annealed, gamma 0.99, lambda 0.95, clip 0.2 (clipped value loss
  on both sides), entropy 0.01, value 0.5, grad norm 0.5, tanh 64x64 actor and critic,
  advantages normalised per minibatch. Where the two cannot be equal: theirs learns each
  agent from its own reward (JaxMARL's simple_spread: half the shared coverage reward, half its
  own collision penalty); ours learns every agent from the team reward (the sum of the
  agents' rewards), scaled here by `reward_scale = 1/3` so that the reward each agent learns
  from (the team's mean) has theirs' magnitude. Ours appends a one-hot agent id to the actor's
  and the critic's inputs and bootstraps through the time limit; theirs does neither.
- `vdn`: ours `vdn` (`jaxrl_sys.agents.qmix.vdn`) beside baselines/QLearning/vdn_ff.py with
  config/alg/vdn_ff_mpe.yaml: 32 envs x 16 steps per iteration, one gradient step of 32 joint
  transitions per iteration from a 100,000-transition buffer after 10,000 env steps, RAdam lr
  0.005 decayed linearly, grad norm 25, gamma 0.9, target copied every 200 updates, epsilon
  1 -> 0.05 over the first 10%, team reward = the sum of the agents' rewards on both sides, no
  double Q (theirs takes the target network's max; ours `double_q=False`). Two changes to
  their yaml, the same on both sides: their `QNetwork` has `NUM_LAYERS - 2` hidden layers, so
  the yaml's NUM_LAYERS=2 is a linear Q-function, which our config refuses (`hidden` must be
  non-empty): both use one relu layer of 64 (NUM_LAYERS=3, `hidden=(64,)`); and their greedy
  test during training (512 envs x 30 steps every 5% of updates, which ours does not do inside
  training) is off (TEST_DURING_TRAINING=False), so both time training only. Their script
  needs `flashbax` (`pip install flashbax`).

JaxMARL's scripts are not vendored: `--jaxmarl-baselines` is the `baselines/` folder of a
JaxMARL checkout (default /work/scratch/jaxmarl_src/baselines, JaxMARL commit c793d09 when
results/jaxmarl_side_by_side.md was made, with jaxmarl 0.2.0 installed). Their files are
loaded with importlib from there. They import `hydra` and `omegaconf` at the top for their
`main()` only, which is not called; where those are not installed, empty stand-in modules are
put in `sys.modules` while the file loads (and taken out again), so the comparison does not
need hydra-core. `wandb.init(mode="disabled")` is called first, as their `main()` does with
the yaml's WANDB_MODE=disabled (ippo_ff_mpe.py calls `wandb.log` from inside training).

Returns compared are the team-sum episode return (the sum of the 3 agents' rewards over an
episode). Ours: the mean return of the episodes that ended in the run's last 5% of
iterations (our `jaxmarl:` adapter's reward is the team sum). Theirs: the mean over the last
5% of iterations of their logged `returned_episode_returns` (per iteration, the mean over all
steps, envs and agents of the return of each env's last finished episode). JaxMARL's
`MPELogWrapper` logs each agent's return multiplied by the number of agents ("as per the
on-policy codebase"), so its mean over the agents is the team sum itself: mean_a(N * R_a) =
sum_a R_a. (Theirs trails ours by at most one episode, 26 steps.) Random play scores about
-79 on this scale.

Prints a markdown table per pair (median env-steps/s on the wall clock and each round's, the
ratio ours/theirs, the same per CPU-second of the process, and each run's final return) and
writes it with the machine, date and budget to results/jaxmarl_side_by_side.md, the numbers
to results/jaxmarl_side_by_side.json. Env steps are steps of the vectorised team env (one step
of all 3 agents), counted alike on both sides (JaxMARL's TOTAL_TIMESTEPS counts the same).

    python benchmarks/bench_jaxmarl.py                           # both pairs, 3 rounds, 1M steps
    python benchmarks/bench_jaxmarl.py --pairs ippo --repeats 1 --ippo-steps 204800 --no-write
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ENV = "jaxmarl:MPE_simple_spread_v3"
JAXMARL_ENV = "MPE_simple_spread_v3"
FINAL_FRACTION = 0.05  # the final return: the last 5% of iterations
DEFAULT_BASELINES = "/work/scratch/jaxmarl_src/baselines"
RESULTS = Path(__file__).resolve().parents[1] / "results" / "jaxmarl_side_by_side"

# baselines/IPPO/config/ippo_ff_mpe.yaml (TOTAL_TIMESTEPS set per run; SEED/NUM_SEEDS and the
# wandb fields are main()'s)
IPPO_CONFIG = {
    "LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5, "ACTIVATION": "tanh", "ENV_NAME": JAXMARL_ENV, "ENV_KWARGS": {},
    "ANNEAL_LR": True,
}
# baselines/QLearning/config/alg/vdn_ff_mpe.yaml (NUM_LAYERS and TEST_DURING_TRAINING changed:
# see the docstring; the evaluation and saving fields unused)
VDN_CONFIG = {
    "NUM_ENVS": 32, "NUM_STEPS": 16, "BUFFER_SIZE": 1e5, "BUFFER_BATCH_SIZE": 32,
    "HIDDEN_SIZE": 64, "NUM_LAYERS": 3, "EPS_START": 1.0, "EPS_FINISH": 0.05, "EPS_DECAY": 0.1,
    "MAX_GRAD_NORM": 25, "TARGET_UPDATE_INTERVAL": 200, "TAU": 1.0, "NUM_EPOCHS": 1,
    "LR": 0.005, "LEARNING_STARTS": 10000, "LR_LINEAR_DECAY": True, "GAMMA": 0.9,
    "ENV_NAME": JAXMARL_ENV, "ENV_KWARGS": {}, "TEST_DURING_TRAINING": False,
    "TEST_NUM_STEPS": 30, "TEST_NUM_ENVS": 512, "TEST_INTERVAL": 0.05, "WANDB_MODE": "disabled",
    "ALG_NAME": "vdn_ff",
}


def our_ippo_config(total_steps: int):
    """Our IPPO config equal to ippo_ff_mpe.yaml (its choices where ours differ by default:
    clipped value loss, lr 2.5e-4, 16 envs; rewards scaled to one agent's share)."""
    from jaxrl_sys.agents.mappo import ippo

    return dataclasses.replace(
        ippo.default_config(ENV), num_envs=16, rollout_steps=128, update_epochs=4,
        num_minibatches=4, learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95,
        clip_eps=0.2, ent_coef=0.01, vf_coef=0.5, clip_value=True, max_grad_norm=0.5,
        normalize_advantages=True, hidden=(64, 64), activation="tanh", critic="local",
        memory="none", reward_scale=1 / 3, total_steps=total_steps)


def our_vdn_config(total_steps: int):
    """Our VDN config equal to vdn_ff_mpe.yaml (with one hidden layer: see the docstring)."""
    from jaxrl_sys.agents.qmix import vdn

    return dataclasses.replace(
        vdn.default_config(ENV), num_envs=32, rollout_steps=16, seq_length=1, burn_in=0,
        updates_per_iteration=1, buffer_size=100_000, batch_size=32, learning_starts=10_000,
        learning_rate=0.005, optimizer="radam", anneal_lr=True, final_lr_fraction=0.0,
        max_grad_norm=25.0, gamma=0.9, n_step=1, double_q=False, target_update_period=200,
        tau=1.0, epsilon_start=1.0, epsilon_end=0.05, exploration_fraction=0.1,
        reward_scale=1.0, hidden=(64,), activation="relu", memory="none", mixer="vdn",
        total_steps=total_steps)


def build_ours(agent_name: str, total_steps: int):
    """(train(seed) -> final team-sum return, env steps per run) for our agent, compiled."""
    import jax
    import numpy as np

    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.execution import place, placement_fns

    config = (our_ippo_config if agent_name == "ippo" else our_vdn_config)(total_steps)
    agent = agents.load(agent_name).make(envs.make(ENV), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs,
                   iters_per_chunk=config.num_iterations, num_devices=1)
    run_chunk = runner.run_chunk.lower(runner.init(np.arange(1))).compile()
    last = max(1, round(config.num_iterations * FINAL_FRACTION))

    def train(seed: int) -> float:
        _, metrics = run_chunk(runner.init(np.array([seed])))
        metrics = jax.block_until_ready(metrics)
        returns = np.asarray(metrics["episode_return_sum"])[0, -last:].sum()
        count = np.asarray(metrics["episode_count"])[0, -last:].sum()
        return float(returns / max(count, 1.0))

    return train, config.num_iterations * config.steps_per_iteration


def load_baseline(path: Path) -> types.ModuleType:
    """A JaxMARL baseline script as a module, loaded from its file; `hydra` and `omegaconf`
    (imported at its top for its `main()`) stand-ins while it loads if they are not installed."""
    if not path.is_file():
        raise SystemExit(f"error: {path} not found (--jaxmarl-baselines: the baselines/ folder "
                         "of a JaxMARL checkout)")
    stubs = {}
    for name in ("hydra", "omegaconf"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            stubs[name] = types.ModuleType(name)
    if "hydra" in stubs:
        stubs["hydra"].main = lambda *args, **kwargs: (lambda fn: fn)
    if "omegaconf" in stubs:
        stubs["omegaconf"].OmegaConf = None
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location(f"jaxmarl_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name in stubs:
            del sys.modules[name]
    return module


def build_theirs(agent_name: str, total_steps: int, baselines: Path):
    """JaxMARL's `make_train` for the same budget, compiled here; the same kind of function as
    `build_ours`."""
    import jax
    import numpy as np
    import wandb

    wandb.init(mode="disabled")  # their main() with WANDB_MODE=disabled
    if agent_name == "ippo":
        module = load_baseline(baselines / "IPPO" / "ippo_ff_mpe.py")
        config = dict(IPPO_CONFIG, TOTAL_TIMESTEPS=total_steps)
        train_fn = module.make_train(config)
    else:
        module = load_baseline(baselines / "QLearning" / "vdn_ff.py")
        config = dict(VDN_CONFIG, TOTAL_TIMESTEPS=total_steps)
        env, _ = module.env_from_config(dict(config))
        train_fn = module.make_train(config, env)
    compiled = jax.jit(train_fn).lower(jax.random.PRNGKey(0)).compile()
    updates = int(config["NUM_UPDATES"])
    last = max(1, round(updates * FINAL_FRACTION))

    def train(seed: int) -> float:
        out = jax.block_until_ready(compiled(jax.random.PRNGKey(seed)))
        if agent_name == "ippo":
            returns = np.asarray(out["metrics"]["returned_episode_returns"])  # [updates]
            return float(returns[-last:].mean())
        # vdn_ff.py returns no metrics (it logs to wandb only when WANDB_MODE is not
        # "disabled"): the last finished episode of each env, from the final env state
        env_state = out["runner_state"][2][1]
        return float(np.asarray(env_state.returned_episode_returns).mean())

    return train, updates * config["NUM_STEPS"] * config["NUM_ENVS"]


PAIRS = {
    "ippo": ("jaxrl_sys ippo", "JaxMARL ippo_ff_mpe.py"),
    "vdn": ("jaxrl_sys vdn", "JaxMARL vdn_ff.py"),
}


def run_pair(pair: str, total_steps: int, repeats: int, baselines: Path) -> dict:
    """Compile both sides of `pair`, then alternate them for `repeats` rounds."""
    ours_name, theirs_name = PAIRS[pair]
    start = time.perf_counter()
    sides = {ours_name: build_ours(pair, total_steps)}
    ours_compile = time.perf_counter() - start
    start = time.perf_counter()
    sides[theirs_name] = build_theirs(pair, total_steps, baselines)
    theirs_compile = time.perf_counter() - start
    print(f"# {pair}: compiled (ours {ours_compile:.0f} s, theirs {theirs_compile:.0f} s)",
          file=sys.stderr, flush=True)
    runs = {name: [] for name in sides}
    for seed in range(repeats):
        for name, (train, steps) in sides.items():
            load = os.getloadavg()[0]
            start, cpu_start = time.perf_counter(), time.process_time()
            final = train(seed)
            seconds = time.perf_counter() - start
            cpu_seconds = time.process_time() - cpu_start
            runs[name].append({"seed": seed, "env_steps": steps, "seconds": seconds,
                               "cpu_seconds": cpu_seconds, "steps_per_s": steps / seconds,
                               "steps_per_cpu_s": steps / cpu_seconds, "final_return": final,
                               "load_before": load})
            print(f"{pair} round {seed + 1}: {name}: {steps / seconds:,.0f} env-steps/s "
                  f"({seconds:.1f} s, {cpu_seconds:.1f} CPU s), final return {final:.1f}, "
                  f"load {load:.2f}", file=sys.stderr, flush=True)
    median = lambda name, key: statistics.median(r[key] for r in runs[name])  # noqa: E731
    return {
        "pair": pair, "ours": ours_name, "theirs": theirs_name,
        "env_steps_per_run": sides[ours_name][1],
        "theirs_env_steps_per_run": sides[theirs_name][1],
        "compile_seconds": {ours_name: ours_compile, theirs_name: theirs_compile},
        "runs": runs,
        "median_steps_per_s": {name: median(name, "steps_per_s") for name in sides},
        "median_steps_per_cpu_s": {name: median(name, "steps_per_cpu_s") for name in sides},
        "ratio": median(ours_name, "steps_per_s") / median(theirs_name, "steps_per_s"),
        "cpu_ratio": (median(ours_name, "steps_per_cpu_s")
                      / median(theirs_name, "steps_per_cpu_s")),
        "median_final_return": {name: median(name, "final_return") for name in sides},
    }


def table(result: dict) -> str:
    """One pair's markdown table."""
    lines = [
        f"**{result['pair']}** — {result['env_steps_per_run']:,} env steps per run, "
        f"{len(result['runs'][result['ours']])} alternating rounds (round i: seed i both "
        "sides)\n",
        "| implementation | median env-steps/s | each run (env-steps/s) | ours / theirs | "
        "median env-steps per CPU-second | ours / theirs (CPU) | final team-sum return "
        "(each run, last 5%) | median final return |",
        "|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for name, runs in result["runs"].items():
        ours = name == result["ours"]
        ratio = f"**{result['ratio']:.2f}**" if ours else ""
        cpu_ratio = f"**{result['cpu_ratio']:.2f}**" if ours else ""
        each = ", ".join(f"{r['steps_per_s']:,.0f}" for r in runs)
        finals = ", ".join(f"{r['final_return']:.1f}" for r in runs)
        lines.append(f"| {name} | {result['median_steps_per_s'][name]:,.0f} | {each} | {ratio} "
                     f"| {result['median_steps_per_cpu_s'][name]:,.0f} | {cpu_ratio} | "
                     f"{finals} | {result['median_final_return'][name]:.1f} |")
    return "\n".join(lines)


def cpu_model() -> str:
    """`lscpu`'s model name (the platform's processor string without lscpu)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="+", choices=tuple(PAIRS), default=list(PAIRS))
    parser.add_argument("--repeats", type=int, default=3, help="alternating rounds per pair")
    parser.add_argument("--ippo-steps", type=int, default=1_048_576,
                        help="env steps per IPPO run (whole iterations of 16 x 128)")
    parser.add_argument("--vdn-steps", type=int, default=1_048_576,
                        help="env steps per VDN run (whole iterations of 32 x 16)")
    parser.add_argument("--jaxmarl-baselines", type=Path, default=Path(DEFAULT_BASELINES),
                        help="the baselines/ folder of a JaxMARL checkout")
    parser.add_argument("--no-write", action="store_true",
                        help="print only; leave results/jaxmarl_side_by_side.* alone")
    args = parser.parse_args()
    if args.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return 2
    budgets = {"ippo": args.ippo_steps // 2048 * 2048, "vdn": args.vdn_steps // 512 * 512}
    if any(budgets[p] < 1 for p in args.pairs):
        print("error: a budget below one iteration", file=sys.stderr)
        return 2

    from jaxrl_sys.runtime.devices import describe, request_devices

    request_devices(1)  # train.py's XLA:CPU flags, for both sides
    import jax

    started = time.strftime("%Y-%m-%d %H:%M")
    machine = f"{cpu_model()}, {os.cpu_count()} cores"
    load_before = os.getloadavg()[0]
    results = [run_pair(p, budgets[p], args.repeats, args.jaxmarl_baselines)
               for p in args.pairs]
    load_after = os.getloadavg()[0]

    command = " ".join(["python benchmarks/bench_jaxmarl.py", *sys.argv[1:]])
    header = (f"# jaxrl_sys beside JaxMARL's baselines on MPE simple_spread (3 agents)\n\n"
              f"Made by `{command}` on {started}: {machine}; {describe()}; jax "
              f"{jax.__version__}, jaxmarl {importlib.metadata.version('jaxmarl')}; "
              f"1-minute load average {load_before:.2f} before, {load_after:.2f} after (other "
              "jobs share the cores: compare rates within a round). Ours and theirs "
              "alternate in one process, each compiled first; a run is a whole training run "
              "of the budget. Env steps: steps of the 3-agent env. Final return: the team-sum "
              "episode return (the sum of the agents' rewards), mean over the last 5% of "
              "iterations; JaxMARL's logged MPE return is already this (each agent's return "
              "times 3, averaged over agents). Configs and the two deliberate differences: "
              "the docstring of benchmarks/bench_jaxmarl.py.\n")
    text = header + "\n" + "\n\n".join(table(r) for r in results) + "\n"
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.with_suffix(".md").write_text(text)
        record = {"date": started, "machine": machine, "devices": describe(),
                  "jax": jax.__version__, "command": command,
                  "load_average_before": load_before, "load_average_after": load_after,
                  "final_fraction": FINAL_FRACTION, "budgets": budgets, "pairs": results}
        RESULTS.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {RESULTS.with_suffix('.md')} and .json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
