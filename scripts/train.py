"""Train an agent on device: `python scripts/train.py --agent ppo --env CartPole-v1 --seeds 8`.

A thin front: parses flags, places the agent with jaxrl_sys.execution, runs the chunked
driver and logs every chunk (progress bar, JSONL, TensorBoard). Bad input is reported in one
line with exit code 2.
"""

from __future__ import annotations

import time

PROCESS_START = time.perf_counter()

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Optional, Sequence  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit code 2."""


class TrainingStopped(Exception):
    """A run stopped by a fault at run time (not bad input): one line, exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, never a usage dump
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", default="ppo", help="algorithm: ppo, dqn, sac or muzero")
    p.add_argument("--env", default=None, help="environment name (default: the agent's default)")
    p.add_argument("--devices", type=int, default=1, help="devices for data-parallel learning")
    p.add_argument("--seeds", type=int, default=1, help="independent seeds, vmapped")
    p.add_argument("--seed", type=int, default=0, help="first seed; seeds are seed..seed+N-1")
    p.add_argument("--total-steps", type=int, default=None, help="env steps per seed")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config field (repeatable), e.g. --set learning_rate=1e-3")
    p.add_argument("--chunks", type=int, default=20, help="log points (compiled calls) per run")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help="greedy evaluation episodes at the end of every chunk (default: the "
                        "agent's; 0 turns it off). When on, 'solved' means the greedy return")
    p.add_argument("--target-return", type=float, default=None,
                   help="stop once the mean return over seeds reaches this value")
    p.add_argument("--run-root", default="runs", help="directory that holds run directories")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--checkpoint-every", type=int, default=5,
                   help="save a checkpoint every N chunks (and at the end); 0: only at the end")
    p.add_argument("--keep-checkpoints", type=int, default=3, help="checkpoints kept (the last k)")
    p.add_argument("--no-save-replay", action="store_true",
                   help="leave replay buffers out of checkpoints (smaller; resumed runs then "
                        "start with empty replay and are no longer exact)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its latest checkpoint, with the "
                        "flags it was started with")
    p.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                   help="multi-process run: address of process 0 (with --num-processes, "
                        "--process-id); under SLURM or Open MPI with several tasks, detected")
    p.add_argument("--num-processes", type=int, default=None, help="multi-process run: P")
    p.add_argument("--process-id", type=int, default=None, help="multi-process run: 0..P-1")
    p.add_argument("--staleness", type=int, default=1,
                   help="host loop (gymnasium: envs): updates the acting parameters may lag "
                        "the learner by; 0 alternates acting and learning")
    p.add_argument("--step-timeout", type=float, default=60.0,
                   help="host loop: seconds an env step may take before the run is stopped")
    return p


def check_counts(args: argparse.Namespace) -> None:
    for flag in ("devices", "seeds", "chunks"):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.total_steps is not None and args.total_steps < 1:
        raise UsageError(f"--total-steps must be >= 1, got {args.total_steps}")
    if args.eval_episodes is not None and args.eval_episodes < 0:
        raise UsageError(f"--eval-episodes must be >= 0, got {args.eval_episodes}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.checkpoint_every < 0:
        raise UsageError(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    if args.keep_checkpoints < 1:
        raise UsageError(f"--keep-checkpoints must be >= 1, got {args.keep_checkpoints}")
    if args.staleness < 0:
        raise UsageError(f"--staleness must be >= 0, got {args.staleness}")
    if not args.step_timeout > 0:
        raise UsageError(f"--step-timeout must be > 0, got {args.step_timeout}")


def check_host_loop(args: argparse.Namespace, agent_module, config) -> None:
    """What the host loop (gymnasium: envs) does not do, as one-line usage errors."""
    if not hasattr(agent_module, "host_fns"):
        raise UsageError(f"agent {args.agent!r} has no host loop; gymnasium: envs run with "
                         "ppo, dqn or sac")
    if args.devices != 1 or args.seeds != 1:
        raise UsageError("gymnasium: envs run one seed on one device through the host loop; "
                         "use --devices 1 --seeds 1")
    if args.eval_episodes:
        raise UsageError("--eval-episodes is not available for gymnasium: envs; training "
                         "returns are reported")
    if getattr(config, "normalize_obs", False):
        raise UsageError("normalize_obs is not available for gymnasium: envs")


class _SilentLogger:
    """The logger of processes other than 0: they compute, process 0 writes."""

    def log(self, env_steps: int, metrics: dict) -> None:
        pass

    def reset_clock(self, env_steps: Optional[int] = None, elapsed: float = 0.0) -> None:
        pass

    def close(self) -> dict:
        return {}


RUN_ARGS_FILE = "args.json"  # the flags a run was started with, for --resume
# flags a resumed run takes from its own command line (the process layout may change too)
_RESUME_KEEPS = ("resume", "no_progress")
_PER_PROCESS = ("coordinator", "num_processes", "process_id")


def resumed_args(args: argparse.Namespace) -> argparse.Namespace:
    """The flags the run in `args.resume` was started with (plus this command's --no-progress)."""
    import json

    from jaxrl_sys.checkpoint import CheckpointError

    run_dir = Path(args.resume)
    if not run_dir.is_dir():
        raise CheckpointError(f"no run directory at {run_dir}")
    try:
        stored = json.loads((run_dir / RUN_ARGS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{run_dir} is not a resumable run ({RUN_ARGS_FILE}: "
                              f"{type(error).__name__})") from None
    merged = vars(build_parser().parse_args([]))
    merged.update({k: v for k, v in stored.items() if k in merged})
    merged.update({k: getattr(args, k) for k in _RESUME_KEEPS + _PER_PROCESS if hasattr(args, k)})
    return argparse.Namespace(**merged)


@dataclasses.dataclass
class AgentSetup:
    """An agent built from a run's flags (shared by train.py and evaluate.py)."""

    module: object
    env_name: str
    env: object
    env_kwargs: dict
    config: object
    agent: object
    host: bool


def resolve_config(args: argparse.Namespace) -> tuple[Any, str, Any, dict]:
    """The agent module, env name, validated config and env keyword arguments of `args`.

    Touches no device: runs before devices are requested, so that bad input is refused
    before anything is created.
    """
    import agents
    import envs
    from jaxrl_sys.config import apply_overrides, split_env_overrides

    module = agents.load(args.agent)
    env_name = args.env or module.DEFAULT_ENV
    config = module.default_config(env_name)
    if args.total_steps is not None:
        config = dataclasses.replace(config, total_steps=args.total_steps)
    agent_pairs, env_kwargs = split_env_overrides(args.overrides)
    config = apply_overrides(config, agent_pairs)
    config.validate()
    if envs.is_host_env(env_name):
        check_host_loop(args, module, config)
    return module, env_name, config, env_kwargs


def eval_episodes_of(args: argparse.Namespace, module, host: bool) -> int:
    """Greedy evaluation episodes per chunk: the flag, else the agent's default (0 on host)."""
    if args.eval_episodes is not None:
        return args.eval_episodes
    return 0 if host else getattr(module, "DEFAULT_EVAL_EPISODES", 0)


def build_agent(args: argparse.Namespace) -> AgentSetup:
    """The agent module, env, config and agent that `args` (train.py's flags) describe."""
    import envs

    module, env_name, config, env_kwargs = resolve_config(args)
    host = envs.is_host_env(env_name)
    if host:
        env = envs.make_host(env_name, **env_kwargs)
        agent = module.make(env, config, axis_name=None)
    else:
        env = envs.make(env_name, normalize_obs=getattr(config, "normalize_obs", False),
                        **env_kwargs)
        agent = module.make(env, config)
    return AgentSetup(module, env_name, env, env_kwargs, config, agent, host)


def run(args: argparse.Namespace) -> int:
    """Everything after argument parsing; raises the user-facing errors caught by main()."""
    if args.resume is not None:
        args = resumed_args(args)
    check_counts(args)
    from jaxrl_sys import distributed
    from jaxrl_sys.devices import (
        describe, enable_compile_cache, request_devices, set_safe_cpu_flags,
    )

    group = distributed.process_group(args.coordinator, args.num_processes, args.process_id)
    import envs
    from jaxrl_sys.execution import check_placement

    # refuse a config or placement that cannot work before any device is created
    module, env_name, config, _ = resolve_config(args)
    if not envs.is_host_env(env_name):
        check_placement(config.num_envs, args.devices,
                        eval_episodes_of(args, module, host=False))
    if group.multi:
        if args.devices % group.num_processes:
            raise UsageError(f"--devices {args.devices} does not divide over "
                             f"{group.num_processes} processes")
        set_safe_cpu_flags()
        distributed.initialize(group, local_cpu_devices=args.devices // group.num_processes)
    else:
        request_devices(args.devices)
    enable_compile_cache()
    main_process = distributed.is_main_process()

    import numpy as np

    from jaxrl_sys import driver
    from jaxrl_sys.config import config_to_dict
    from jaxrl_sys.execution import place
    from jaxrl_sys.metrics import RunLogger, make_run_dir

    setup = build_agent(args)
    agent_module, env_name, env, config, agent = (
        setup.module, setup.env_name, setup.env, setup.config, setup.agent
    )
    env_kwargs, host = setup.env_kwargs, setup.host
    eval_episodes = eval_episodes_of(args, agent_module, host)
    if eval_episodes and getattr(config, "normalize_obs", False):
        raise UsageError("--eval-episodes needs normalize_obs=false (statistics live in the "
                         "training envs)")
    eval_fn = None
    if eval_episodes:
        from jaxrl_sys.evaluation import make_eval_fn

        # the env's evaluation variant: the same game, e.g. against a perfect opponent
        eval_env = envs.make_eval(env_name, **env_kwargs)
        eval_fn = make_eval_fn(eval_env, agent_module.greedy_action(agent))
    iters_per_chunk = math.ceil(config.num_iterations / args.chunks)
    num_chunks = math.ceil(config.num_iterations / iters_per_chunk)
    if not host:
        runner = place(
            *agent_module.placement_fns(agent),
            num_envs=config.num_envs,
            num_devices=args.devices,
            iters_per_chunk=iters_per_chunk,
            eval_fn=eval_fn,
            eval_episodes=eval_episodes,
            eval_outcomes=env.spec.num_players == 2,
        )
    seeds = np.arange(args.seed, args.seed + args.seeds)
    steps_per_chunk = iters_per_chunk * config.steps_per_iteration  # per seed
    threshold = args.target_return if args.target_return is not None else envs.reward_threshold(env_name)

    if host and group.multi:
        raise UsageError("gymnasium: envs run in one process (no --coordinator)")
    if args.resume is not None:
        run_dir = Path(args.resume)
        if host:
            raise UsageError("runs of gymnasium: envs cannot be resumed (their env state lives "
                             "in worker processes)")
    elif main_process:
        run_dir = make_run_dir(args.run_root, args.agent, env_name)
        stored = {k: v for k, v in vars(args).items() if k not in _RESUME_KEEPS + _PER_PROCESS}
        (run_dir / RUN_ARGS_FILE).write_text(json.dumps(stored, indent=2) + "\n", encoding="utf-8")
    if args.resume is None and group.multi:  # every process writes its checkpoint shards here
        run_dir = Path(distributed.broadcast_text(str(run_dir) if main_process else ""))
    if main_process:
        print(
            f"{args.agent} on {env_name}: {args.seeds} seed(s) on {describe()} using "
            f"{args.devices}{f' in {group.num_processes} processes' if group.multi else ''}, "
            f"{num_chunks} chunks x {iters_per_chunk} iterations x {config.steps_per_iteration} "
            f"steps; run dir {run_dir}",
            file=sys.stderr,
        )
        logger = RunLogger(
            run_dir,
            total_steps=num_chunks * steps_per_chunk * args.seeds,
            config=None if args.resume else {
                "agent": args.agent, "env": env_name, "seeds": seeds.tolist(),
                "devices": args.devices, **config_to_dict(config),
            },
            progress=not args.no_progress,
        )
    else:  # logging and printing are process 0's
        logger = _SilentLogger()
    solved_at: dict[str, float] = {}
    restored, start_chunk = None, 0  # a resumed run continues after its checkpoint's chunk
    from jaxrl_sys.checkpoint import Checkpointer

    checkpointer = Checkpointer(run_dir, keep=args.keep_checkpoints,
                                save_replay=not args.no_save_replay, create=args.resume is None)
    if not host:
        if args.resume is not None:
            restored, record = checkpointer.restore(runner.init(seeds))
            start_chunk = int(record["chunk"]) + 1
            solved_at.update(record.get("solved_at", {}))
            print(f"resuming {run_dir} after chunk {start_chunk - 1}", file=sys.stderr)

    def on_checkpoint(chunk: int, carry) -> None:
        checkpointer.save(chunk, carry, {"solved_at": solved_at})

    def on_chunk(summary: driver.ChunkSummary, train_seconds: float) -> bool:
        steps_per_seed = (summary.chunk + 1) * steps_per_chunk
        if summary.chunk == start_chunk:
            # steps/s of this process's training only: not compilation, not a resumed past
            logger.reset_clock(start_chunk * steps_per_chunk * args.seeds, elapsed=train_seconds)
        returns = summary.returns[np.isfinite(summary.returns)]
        logger.log(steps_per_seed * args.seeds, {
            "env_steps_per_seed": steps_per_seed,
            "train_seconds": train_seconds,
            "mean_return": summary.mean_return,
            "min_return": float(returns.min()) if returns.size else float("nan"),
            "max_return": float(returns.max()) if returns.size else float("nan"),
            **summary.scalars,
        })
        measured = (
            float(np.mean(summary.eval_returns)) if summary.eval_returns is not None
            else summary.mean_return
        )
        if threshold is not None and not solved_at and measured >= threshold:
            solved_at.update(process_seconds=time.perf_counter() - PROCESS_START,
                             train_seconds=train_seconds, steps_per_seed=steps_per_seed)
            return args.target_return is not None
        return False

    try:
        if host:
            from jaxrl_sys import host_loop

            loop_config = host_loop.HostLoopConfig(staleness=args.staleness,
                                                   step_timeout=args.step_timeout)
            result = host_loop.train(
                env, agent_module.host_fns(agent), seed=args.seed,
                num_iterations=config.num_iterations, iters_per_chunk=iters_per_chunk,
                config=loop_config, on_chunk=on_chunk, checkpoint_every=args.checkpoint_every,
                on_checkpoint=on_checkpoint,
            )
        else:
            result = driver.train(
                runner, seeds, num_chunks, on_chunk, carry=restored, start_chunk=start_chunk,
                checkpoint_every=args.checkpoint_every, on_checkpoint=on_checkpoint,
            )
    except driver.NonFiniteError as error:
        last = checkpointer.latest_chunk()
        again = "evaluate it with scripts/evaluate.py" if host else f"resume with --resume {run_dir}"
        kept = (f"last good checkpoint: chunk {last} ({again})"
                if last is not None else "no checkpoint was saved before it")
        raise TrainingStopped(f"{error}; {kept}") from None
    finally:
        logger.close()
        checkpointer.close()
    if not result.history:
        if main_process:
            print(f"done: nothing left to run in {run_dir}")
        return 0
    final = result.history[-1]
    steps = len(result.history) * steps_per_chunk  # in this process
    rate = steps * args.seeds / result.train_seconds
    steps += start_chunk * steps_per_chunk
    solved = (
        f"reached {threshold:g} at {solved_at['process_seconds']:.1f} s after start "
        f"({solved_at['train_seconds']:.1f} s training, {solved_at['steps_per_seed']:,} steps/seed)"
        if solved_at else
        (f"did not reach {threshold:g}" if threshold is not None else "no threshold")
    )
    per_seed = ", ".join(f"{r:.1f}" for r in final.returns)
    greedy = (
        f"; greedy eval return {float(np.mean(final.eval_returns)):.1f} over {eval_episodes} "
        f"episodes/seed" if final.eval_returns is not None else ""
    )
    if "eval_win" in final.scalars:
        greedy += " (W/D/L " + "/".join(
            f"{final.scalars[f'eval_{k}']:.0%}" for k in ("win", "draw", "loss")) + ")"
    if main_process:
        print(
            f"done: {steps:,} steps/seed x {args.seeds} seed(s) in {result.train_seconds:.1f} s "
            f"(+{result.compile_seconds:.1f} s compile), {rate:,.0f} env-steps/s; final mean return "
            f"{final.mean_return:.1f} [{per_seed}]{greedy}; {solved}"
            f"{' (greedy)' if final.eval_returns is not None and solved_at else ''}; {run_dir}"
        )
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from agents import UnknownAgentError
    from envs import UnknownEnvError
    from envs.gymnasium_env import UnsupportedEnvError
    from jaxrl_sys.checkpoint import CheckpointError
    from envs.registry import EnvParamError
    from jaxrl_sys.config import ConfigError
    from jaxrl_sys.execution import PlacementError
    from jaxrl_sys.host_loop import HostLoopError

    from jaxrl_sys.distributed import DistributedError

    user_errors = (UsageError, UnknownAgentError, UnknownEnvError, EnvParamError, ConfigError,
                   PlacementError, UnsupportedEnvError, CheckpointError, DistributedError)
    try:
        args = build_parser().parse_args(argv)
        return run(args)
    except user_errors as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (HostLoopError, TrainingStopped) as error:  # faults at run time: not bad input
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
