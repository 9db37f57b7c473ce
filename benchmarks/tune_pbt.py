"""The same PBT with `train.py --pbt` and with Ray Tune: `python benchmarks/tune_pbt.py`.

Both sides train PPO (this project's agent, its shipped defaults for the env) with the same
16 initial settings (the sweep's draws of the same ranges and seed), the same rules (Tune's
`PopulationBasedTraining`: quantile 0.25, resample probability 0.25, factors 1.2 and 0.8,
synchronous) and the same interval in chunks of the same size:

- ours: one `train.py --sweep ... --samples 16 --pbt` process on `--devices 2` (both cores);
- Tune: a `Trainable` per member that runs this project's agent one chunk per `step()` (the
  same compiled chunk, its hyper-parameters traced, so `reset_config` changes them without
  compiling again) and checkpoints its whole state through Tune; 2 trials at a time (one
  core each), actors reused.

Wall clock from process start to the end of the budget; the final return is the best
member's mean training return over its last chunk. Needs the `tune` extra
(`pip install -e '.[tune]'`). Writes results/tune_pbt.md and .json unless --no-write.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from jaxrl_sys.runtime.sweeps.population import member_score
from jaxrl_sys.runtime.sweeps.results import SettingResult

ROOT = Path(__file__).resolve().parent.parent
TRAIN = str(ROOT / "scripts" / "train.py")
RANGES = {"learning_rate": ("log", 1e-4, 1e-2), "ent_coef": ("uniform", 0.0, 0.02)}


def sweep_flags() -> list[str]:
    """The `--sweep` flags of the ranges both sides draw from."""
    flags = []
    for key, (scale, low, high) in RANGES.items():
        flags += ["--sweep", f"{key}={scale}:{low:g}:{high:g}"]
    return flags


def run_ours(args: argparse.Namespace, seed: int, root: Path) -> dict:
    """`train.py --pbt` in its own process: wall seconds, the best final return, the
    members' initial settings."""
    argv = [sys.executable, TRAIN, "--agent", "ppo", "--env", args.env, "--seed", str(seed),
            "--samples", str(args.members), *sweep_flags(), "--pbt", "--pbt-interval",
            str(args.interval), "--chunks", str(args.chunks), "--devices", "2",
            *(["--total-steps", str(args.total_steps)] if args.total_steps else []),
            "--run-root", str(root), "--no-progress"]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"error: train.py --pbt: {done.stderr.strip()[-500:]}")
    (run_dir,) = root.iterdir()
    saved = json.loads((run_dir / "sweep.json").read_text())
    finals = [member_score(SettingResult(**s)) for s in saved["settings"]]
    copies = sum(len(m["copied"]) for m in saved["population"]["members"])
    return {"seconds": seconds, "best_final": max(finals), "finals": finals, "copies": copies,
            "settings": [s["values"] for s in saved["settings"]]}


def tune_trainable(env_name: str, chunks: int, total_steps: Optional[int]):
    """A `tune.Trainable` class (built here so that Ray is imported only when needed): one
    member, one of `chunks` chunks of this project's PPO on `env_name` per `step()`."""
    from ray import tune

    class Trainable(tune.Trainable):
        def setup(self, config: dict) -> None:
            from jaxrl_sys.runtime.devices import set_safe_cpu_flags

            set_safe_cpu_flags()  # the flags train.py runs with (one thread per device)

            from jaxrl_sys import RunSpec, agents, envs, resolve
            from jaxrl_sys.runtime.execution import place_rows, placement_fns
            from jaxrl_sys.runtime.loops import chunking

            resolved = resolve(RunSpec(agent="ppo", env=env_name, total_steps=total_steps),
                               agents.load, envs)
            module, base = resolved.module, resolved.config
            env = envs.make(resolved.env_name)
            iters, self.num_chunks = chunking(base.num_iterations, chunks)
            self.chunk_steps = iters * base.steps_per_iteration

            def build(settings):
                agent = module.make(env, dataclasses.replace(base, **settings))
                init_fn, step_fn = placement_fns(agent)
                return init_fn, step_fn, None

            self.runner = place_rows(build, num_envs=base.num_envs, iters_per_chunk=iters,
                                     settings=self._settings(config))
            self._start(config)
            self.run_chunk = self.runner.run_chunk.lower(self.carry).compile()

        def _start(self, config: dict) -> None:
            """A fresh member: initial state for its seed, no returns yet."""
            import numpy as np

            self.carry = self.runner.init(np.asarray([config["seed"]]))
            self.returns: list[list[float]] = []  # this member's chunk returns, as ours keeps

        def _settings(self, config: dict) -> dict:
            import numpy as np

            return {k: np.asarray([config[k]], np.float32) for k in RANGES}

        def step(self) -> dict:
            """One chunk; the metric PBT ranks by is ours (`population.member_score`: a
            chunk without a finished episode counts the last one that had one, or the
            return so far of the episodes in progress)."""
            from jaxrl_sys.runtime.driver import running_returns, summarize
            from jaxrl_sys.runtime.sweeps.population import member_score
            from jaxrl_sys.runtime.sweeps.results import SettingResult

            self.carry, metrics = self.run_chunk(self.carry)
            summary = summarize(self.iteration, self.runner.iters_per_chunk, metrics)
            self.returns.append([float(summary.returns[0])])
            result = SettingResult(0, {}, [], self.returns, [])
            return {"episode_return_mean": member_score(result, running_returns(
                        self.carry.env_state)),
                    "final_return": member_score(result),
                    "env_steps": (self.iteration + 1) * self.chunk_steps}

        def reset_config(self, new_config: dict) -> bool:
            """A reused actor takes another trial (or an exploiting one, which Tune then
            restores): new traced values, no compiling, a fresh start."""
            self.runner.run_chunk.set_settings(self._settings(new_config))
            self.config = new_config
            self._start(new_config)
            return True

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            import jax

            with open(os.path.join(checkpoint_dir, "state.pkl"), "wb") as f:
                pickle.dump((jax.device_get(self.carry), self.returns), f)

        def load_checkpoint(self, checkpoint_dir: str) -> None:
            import jax

            with open(os.path.join(checkpoint_dir, "state.pkl"), "rb") as f:
                host, self.returns = pickle.load(f)
            self.carry = jax.device_put(host, self.runner.carry_sharding())

    return Trainable


def run_tune(args: argparse.Namespace, seed: int, settings: list[dict], root: Path,
             reuse_actors: bool) -> dict:
    """Ray Tune's PBT over the same initial settings: wall seconds (from `ray.init`, in a
    process of its own so that it starts cold like ours) and the best final return."""
    side = {"env_name": args.env, "seed": seed, "chunks": args.chunks,
            "interval": args.interval, "total_steps": args.total_steps,
            "reuse_actors": reuse_actors, "settings_json": json.dumps(settings),
            "root": str(root)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--tune-side", json.dumps(side)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"error: Tune: {done.stderr.strip()[-1500:]}")
    result = json.loads((root / "tune_result.json").read_text())
    return {"seconds": seconds, **result}


def tune_main(env_name: str, seed: int, chunks: int, interval: int,
              total_steps: Optional[int], reuse_actors: bool, settings_json: str,
              root: str) -> None:
    """Tune's side, in its own process: PBT with `PopulationBasedTraining`."""
    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    settings = json.loads(settings_json)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})
    mutations = {k: (tune.loguniform(low, high) if scale == "log" else tune.uniform(low, high))
                 for k, (scale, low, high) in RANGES.items()}
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=interval,
        hyperparam_mutations=mutations, quantile_fraction=0.25, resample_probability=0.25,
        perturbation_factors=(1.2, 0.8), synch=True)
    member = tune.grid_search(list(range(len(settings))))
    space = {"member": member, "seed": seed,
             **{k: tune.sample_from(lambda spec, k=k: settings[spec.config.member][k])
                for k in RANGES}}
    trainable = tune.with_resources(tune_trainable(env_name, chunks, total_steps), {"cpu": 1})
    tuner = tune.Tuner(
        trainable, param_space=space,
        tune_config=tune.TuneConfig(scheduler=scheduler, metric="episode_return_mean",
                                    mode="max", reuse_actors=reuse_actors),
        run_config=tune.RunConfig(
            storage_path=root, stop={"training_iteration": chunks}, verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=interval,
                                                    num_to_keep=2)))
    results = tuner.fit()
    finals = [float(r.metrics["final_return"]) for r in results]
    Path(root, "tune_result.json").write_text(json.dumps(
        {"best_final": max(finals), "finals": finals, "trials": len(finals)}))
    ray.shutdown()


MODES = {"tune": False, "tune_reused": True}  # Tune's default for class trainables; reused


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    """The side-by-side table: ours, Tune with a fresh actor per trial (its default for class
    trainables, as RLlib's), Tune with actors reused (`reset_config`: no compiling again)."""
    ranges = ", ".join(f"{k} {s}:{lo:g}:{hi:g}" for k, (s, lo, hi) in RANGES.items())
    head = (f"# PBT: `train.py --pbt` beside Ray Tune's PopulationBasedTraining\n\n"
            f"Made by `python benchmarks/tune_pbt.py --env {args.env} --chunks {args.chunks} "
            f"--interval {args.interval} --repeats {args.repeats}` on "
            f"{time.strftime('%Y-%m-%d %H:%M')}: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores; ray {rows[0]['ray']}. PPO on {args.env} (shipped "
            f"defaults), {args.members} members of 1 seed, {args.chunks} chunks, exploit every "
            f"{args.interval}; ranges {ranges}. Wall seconds from process start to the end of "
            "the budget; returns: each member's mean training return over its last chunk.\n\n"
            "| seed | side | wall s | / ours | best final return | median member |\n"
            "|---|---|---:|---:|---:|---:|\n")
    lines = []
    names = {"ours": "`train.py --pbt`", "tune": "Tune, an actor per trial (default)",
             "tune_reused": "Tune, actors reused"}
    for row in rows:
        for side in ("ours", *MODES):
            result = row[side]
            finals = sorted(result["finals"])
            lines.append(f"| {row['seed']} | {names[side]} | {result['seconds']:.1f} | "
                         f"{result['seconds'] / row['ours']['seconds']:.1f} | "
                         f"{result['best_final']:.1f} | {finals[len(finals) // 2]:.1f} |")
    return head + "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Acrobot-v1")
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--interval", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="rounds, seeds 0, 1, ...")
    parser.add_argument("--total-steps", type=int, default=None,
                        help="env steps per member (default: the env's shipped PPO default)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--tune-side", default=None, help=argparse.SUPPRESS)  # run_tune's child
    args = parser.parse_args()
    if args.tune_side is not None:
        tune_main(**json.loads(args.tune_side))
        return 0
    try:
        import ray
    except ImportError:
        print("error: the Tune side needs Ray: pip install -e '.[tune]'", file=sys.stderr)
        return 2
    rows = []
    for seed in range(args.repeats):
        work = Path(tempfile.mkdtemp(prefix="tune_pbt_"))
        row = {"seed": seed, "ray": ray.__version__, "ours": run_ours(args, seed, work / "ours")}
        for side, reuse in MODES.items():
            row[side] = run_tune(args, seed, row["ours"]["settings"], work / side, reuse)
        rows.append(row)
        print(", ".join(f"{side} {row[side]['seconds']:.1f} s best {row[side]['best_final']:.1f}"
                        for side in ("ours", *MODES)), flush=True)
    text = markdown(rows, args)
    print(text)
    if not args.no_write:
        (ROOT / "results" / "tune_pbt.md").write_text(text, encoding="utf-8")
        (ROOT / "results" / "tune_pbt.json").write_text(json.dumps(rows, indent=1),
                                                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
