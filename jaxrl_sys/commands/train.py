"""Train an agent: `python scripts/train.py --agent ppo --env CartPole-v1 --seeds 8`.

A thin front: parses flags into a `jaxrl_sys.RunSpec` and hands it to `jaxrl_sys.run`, which
checks it, places the agent, trains (on device, or through the host loop for gymnasium: and
envpool: envs), logs every chunk and checkpoints. Bad input is reported in one line with exit
code 2.
"""

from __future__ import annotations

import time

PROCESS_START = time.perf_counter()

from jaxrl_sys.runtime.cli import console_entry  # noqa: E402  (imports no JAX)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import os  # noqa: E402
from typing import Optional, Sequence  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from jaxrl_sys import agents
    from jaxrl_sys.runtime.cli import Parser
    from jaxrl_sys.runtime.run_spec import RunSpec

    d = RunSpec()
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", default=d.agent, help=f"algorithm: {', '.join(agents.names())}")
    p.add_argument("--env", default=None, help="environment name (default: the agent's default)")
    p.add_argument("--devices", type=int, default=d.devices, help="devices for data-parallel learning")
    p.add_argument("--seeds", type=int, default=d.seeds, help="independent seeds, vmapped")
    p.add_argument("--seed", type=int, default=d.seed, help="first seed; seeds are seed..seed+N-1")
    p.add_argument("--total-steps", type=int, default=None, help="env steps per seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field (repeatable), e.g. --set learning_rate=1e-3")
    p.add_argument("--chunks", type=int, default=d.chunks, help="log points (compiled calls) per run")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help="greedy evaluation episodes at the end of every chunk (default: the "
                        "agent's; 0 turns it off). When on, 'solved' means the greedy return")
    p.add_argument("--eval-opponent", default=None, metavar="OPPONENT",
                   help="two-player games: who greedy evaluation plays, in both seats: random "
                        "(default; tic-tac-toe: perfect), perfect or mcts:N")
    p.add_argument("--target-return", type=float, default=None,
                   help="stop once the mean return over seeds reaches this value")
    p.add_argument("--run-root", default=d.run_root, help="directory that holds run directories")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--wandb", default=None, metavar="PROJECT",
                   help="log metrics and config to this Weights & Biases project as well "
                        "(needs the wandb extra; WANDB_MODE=offline writes it under the run "
                        "directory)")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help="save a checkpoint every N chunks (and at the end); 0: only at the end")
    p.add_argument("--keep-checkpoints", type=int, default=d.keep_checkpoints,
                   help="checkpoints kept (the last k)")
    p.add_argument("--no-save-replay", action="store_true",
                   help="leave replay buffers out of checkpoints (smaller; resumed runs then "
                        "start with empty replay and are no longer exact)")
    p.add_argument("--init-from", default=None, metavar="RUN_DIR",
                   help="start from the latest learner state of the run in RUN_DIR (same agent "
                        "and env), with fresh envs and replay: e.g. an offline iql or cql run "
                        "fine-tuned online with --set online_rollout=N")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its latest checkpoint, with the "
                        "flags it was started with")
    p.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                   help="multi-process run: address of process 0 (with --num-processes, "
                        "--process-id); under SLURM or Open MPI with several tasks, detected")
    p.add_argument("--num-processes", type=int, default=None, help="multi-process run: P")
    p.add_argument("--process-id", type=int, default=None, help="multi-process run: 0..P-1")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=VALUES",
                   help="hyper-parameter sweep, repeatable: KEY=V1,V2,... (a grid over all "
                        "--sweep keys) or KEY=log:LO:HI / KEY=uniform:LO:HI (with --samples); "
                        "settings x seeds train as one compiled program")
    p.add_argument("--samples", type=int, default=d.samples,
                   help="draws of the --sweep ranges (random search)")
    p.add_argument("--sweep-batching", default=d.sweep_batching, choices=("auto", "vmap", "map"),
                   help="a device's sweep rows: all vmapped, or settings mapped one after "
                        "another with seeds vmapped (exactly a run of those seeds); auto: map "
                        "on a CPU, vmap on an accelerator")
    p.add_argument("--pbt", action="store_true",
                   help="population-based training over the --sweep settings: every "
                        "--pbt-interval chunks the bottom quantile copies the whole state of "
                        "members of the top one and perturbs its hyper-parameters (x1.2 or x0.8, "
                        "or a fresh draw), without compiling again")
    p.add_argument("--pbt-interval", type=int, default=d.pbt_interval,
                   help="chunks between PBT's exploit steps")
    p.add_argument("--pbt-quantile", type=float, default=d.pbt_quantile,
                   help="PBT: the fraction of members that copies, and that is copied")
    p.add_argument("--pbt-resample", type=float, default=d.pbt_resample,
                   help="PBT: probability that an explored value is drawn afresh from its range")
    p.add_argument("--halving", type=int, default=d.halving, metavar="ETA",
                   help="successive halving over the --sweep settings: at each rung keep the "
                        "best 1/ETA, which then train ETA times as long")
    p.add_argument("--staleness", type=int, default=d.staleness,
                   help="host loop (gymnasium:, envpool: envs): updates the acting "
                        "parameters may lag the learner by; 0 alternates acting and learning")
    p.add_argument("--step-timeout", type=float, default=d.step_timeout,
                   help="host loop: seconds an env step may take before the run is stopped")
    p.add_argument("--actor-threads", type=int, default=d.actor_threads,
                   help="host loop: actor threads per process, each stepping its own share of "
                        "the envs, so that stepping one batch overlaps inference on another")
    p.add_argument("--actor-devices", type=int, default=d.actor_devices,
                   help="host loop: of the --devices, how many act (the first ones); the "
                        "others learn. Default: all act and learn (shared)")
    return p


def spec_of(args: argparse.Namespace):
    """The run the flags describe; with --resume, the stored run (this command's --no-progress)."""
    from jaxrl_sys.runtime.run_spec import RunSpec, load_spec

    if args.resume is not None:
        return dataclasses.replace(load_spec(args.resume), progress=not args.no_progress)
    return RunSpec(
        agent=args.agent, env=args.env, overrides=tuple(args.overrides),
        total_steps=args.total_steps, devices=args.devices, seeds=args.seeds, seed=args.seed,
        chunks=args.chunks, eval_episodes=args.eval_episodes, eval_opponent=args.eval_opponent,
        target_return=args.target_return,
        run_root=args.run_root, progress=not args.no_progress, wandb=args.wandb,
        checkpoint_every=args.checkpoint_every, keep_checkpoints=args.keep_checkpoints,
        save_replay=not args.no_save_replay, staleness=args.staleness,
        step_timeout=args.step_timeout, actor_threads=args.actor_threads,
        actor_devices=args.actor_devices, sweep=tuple(args.sweep), samples=args.samples,
        sweep_batching=args.sweep_batching, pbt=args.pbt, pbt_interval=args.pbt_interval,
        pbt_quantile=args.pbt_quantile, pbt_resample=args.pbt_resample, halving=args.halving,
        init_from=args.init_from,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit code: 0 done, 1 a fault at run time, 2 bad input, 130 interrupted."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from jaxrl_sys import agents, api, envs
    from jaxrl_sys.runtime import distributed, session
    from jaxrl_sys.runtime.cli import guarded
    from jaxrl_sys.runtime.host import HostLoopError

    def train() -> int:
        args = build_parser().parse_args(argv)
        spec = spec_of(args)
        group = distributed.process_group(args.coordinator, args.num_processes, args.process_id)
        if spec.sweep:
            if group is not None and group.multi:
                raise session.UsageError("sweeps run in one process (no --coordinator)")
            api.sweep(spec, agents.catalog, envs, resume=args.resume)
            return 0
        api.run(spec, agents.catalog, envs, resume=args.resume, group=group,
                process_start=PROCESS_START)
        return 0

    return guarded(train, agents.USER_ERRORS + envs.USER_ERRORS + session.USER_ERRORS,
                   faults=(HostLoopError, session.TrainingStopped))


def entry() -> None:
    """The `jaxrl-train` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
