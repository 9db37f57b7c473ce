"""Run the external application (`examples/external_cartpole.py`) against a learning server for
each agent and inference mode, and say whether every run reached its return: CI's check of
issue 54's example.

    python examples/check_external_cartpole.py                      # DQN and PPO, remote and local
    python examples/check_external_cartpole.py --cases ppo:local --parallel 1

Each case starts `jaxrl-serve --learn --agent AGENT --env gymnasium:CartPole-v1` on a free
port of 127.0.0.1 with the agent's shipped defaults, runs the example's 8 client threads until
the last 100 client episodes average `--until-return` (or the case's step cap), and stops the
server, which must leave a run with its checkpoints and metrics. Prints one markdown row per
case and exits 1 if any case missed, 2 on bad flags.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jaxrl_sys.serve.process import ServerDidNotStart, start_server_process

EXAMPLE = Path(__file__).resolve().parent / "external_cartpole.py"
AGENTS = ("dqn", "ppo")
INFERENCE = ("remote", "local")
# env steps after which a case counts as missed: about 2.5x what each took on the 2-core EPYC
# (docs/design/serving.md); the learning server's budget is the same, so that its learner
# never stops before the case does (DQN's CartPole entry stops at 200k)
STEP_CAP = {"dqn": 450_000, "ppo": 200_000}


def parse_cases(text: str) -> list[tuple[str, str]]:
    """`dqn:remote,ppo:local` -> [(agent, inference), ...]; ValueError names a bad one."""
    cases = []
    for item in text.split(","):
        agent, _, inference = item.strip().partition(":")
        if agent not in AGENTS or inference not in INFERENCE:
            raise ValueError(f"case {item.strip()!r} is not AGENT:INFERENCE with AGENT in "
                             f"{', '.join(AGENTS)} and INFERENCE in {', '.join(INFERENCE)}")
        cases.append((agent, inference))
    return cases


def run_case(agent: str, inference: str, until_return: float, run_root: Path) -> dict:
    """One server and one example run; the example's summary line, with the case named."""
    try:
        server, address = start_server_process(
            ["--learn", "--agent", agent, "--env", "gymnasium:CartPole-v1",
             "--total-steps", str(STEP_CAP[agent]), "--run-root", str(run_root)])
    except ServerDidNotStart as error:
        return {"agent": agent, "inference": inference, "reached": False,
                "error": str(error).splitlines()[-1:]}
    # the server's log is drained so that a full pipe never blocks it
    threading.Thread(target=server.stdout.read, daemon=True).start()
    started = time.monotonic()
    try:
        example = subprocess.run(
            [sys.executable, str(EXAMPLE), address, "--clients", "8", "--inference", inference,
             "--steps", str(STEP_CAP[agent]), "--until-return", str(until_return)],
            capture_output=True, text=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    lines = example.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        summary = {"reached": False, "error": (example.stdout + example.stderr)[-400:]}
    summary.update(agent=agent, inference=inference,
                   wall_s=round(time.monotonic() - started, 1))
    runs = list(run_root.iterdir()) if run_root.is_dir() else []
    if not (len(runs) == 1 and (runs[0] / "checkpoints").is_dir()
            and (runs[0] / "metrics.jsonl").is_file()):
        summary.update(reached=False, error="the server left no run with checkpoints and metrics")
    return summary


def row(result: dict) -> str:
    """One markdown row of the table printed at the end."""
    learner = result.get("learner") or {}
    mean = result.get("mean_last_100")
    return (f"| {result['agent']} | {result['inference']} | "
            f"{'yes' if result['reached'] else 'no'} | "
            f"{'-' if mean is None else f'{mean:.1f}'} | {result.get('steps', 0):,} | "
            f"{learner.get('steps_learned', 0):,} | {result.get('seconds', '-')} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="dqn:remote,dqn:local,ppo:remote,ppo:local",
                   help="comma-separated AGENT:INFERENCE, run longest first")
    p.add_argument("--parallel", type=int, default=2, help="cases run at once")
    p.add_argument("--until-return", type=float, default=475.0)
    args = p.parse_args()
    try:
        cases = parse_cases(args.cases)
    except ValueError as error:
        print(f"check_external_cartpole: {error}", file=sys.stderr)
        return 2
    if args.parallel < 1:
        print("check_external_cartpole: --parallel must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as root:
        def one(case: tuple[str, str]) -> dict:
            result = run_case(*case, args.until_return, Path(root) / ":".join(case))
            print(json.dumps(result), flush=True)
            return result

        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            results = list(pool.map(one, cases))
    print("| agent | inference | reached | last 100 mean | env steps | steps learned | seconds |")
    print("|---|---|---|---:|---:|---:|---:|")
    for result in results:
        print(row(result))
    return 0 if all(result["reached"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
