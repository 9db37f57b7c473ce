"""A sweep against the same settings as separate runs, end to end: `python benchmarks/bench_sweep.py`.

Times (wall clock, process start to exit) 16 `train.py` commands, one per setting of PPO on
CartPole-v1 (4 learning rates x 4 entropy coefficients, 4 seeds each), against one
`train.py --sweep` command of the same 16 settings, and the sweep again on `--devices 8`.
Each side starts from an empty XLA compilation cache of its own. Checks that every setting's
final returns (per seed) are those of its separate run, and that 8 devices give 1 device's
table; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAIN = str(Path(__file__).resolve().parents[1] / "scripts" / "train.py")
LEARNING_RATES = ("1e-3", "2.5e-3", "5e-3", "1e-2")
ENT_COEFS = ("0", "0.003", "0.01", "0.03")
FINAL = re.compile(r"final mean return [-\d.na]+ \[([^\]]*)\]")


def timed(argv: list[str], cache: str, root: str) -> tuple[float, str]:
    """Wall seconds and stdout of one train.py process (its own compile cache)."""
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, TRAIN, *argv, "--run-root", root, "--no-progress"],
                          capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"error: train.py {' '.join(argv)}: {done.stderr.strip()[-300:]}")
    return seconds, done.stdout


def sweep_finals(root: str) -> dict[tuple[str, str], list[float]]:
    """(learning_rate, ent_coef) -> final returns per seed, rounded as train.py prints them."""
    (run_dir,) = Path(root).iterdir()
    saved = json.loads((run_dir / "sweep.json").read_text())
    return {(f"{s['values']['learning_rate']:g}", f"{s['values']['ent_coef']:g}"):
            [round(r, 1) for r in s["returns"][-1]] for s in saved["settings"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--devices", type=int, default=8, help="devices of the second sweep")
    args = parser.parse_args()
    common = ["--agent", "ppo", "--env", "CartPole-v1", "--seeds", str(args.seeds)]
    work = Path(tempfile.mkdtemp(prefix="bench_sweep_"))

    separate_seconds, separate = 0.0, {}
    for lr in LEARNING_RATES:
        for ent in ENT_COEFS:
            seconds, out = timed([*common, "--set", f"learning_rate={lr}", "--set",
                                  f"ent_coef={ent}"], str(work / "cache-separate"),
                                 str(work / "separate"))
            separate_seconds += seconds
            returns = [float(x) for x in FINAL.search(out).group(1).split(",")]
            separate[(f"{float(lr):g}", f"{float(ent):g}")] = returns
            print(f"separate lr={lr} ent={ent}: {seconds:.1f} s", file=sys.stderr, flush=True)

    grid = ["--sweep", f"learning_rate={','.join(LEARNING_RATES)}",
            "--sweep", f"ent_coef={','.join(ENT_COEFS)}"]
    sweep_seconds, _ = timed([*common, *grid], str(work / "cache-sweep"), str(work / "sweep"))
    many_seconds, _ = timed([*common, *grid, "--devices", str(args.devices)],
                            str(work / "cache-sweep-many"), str(work / "sweep-many"))
    one, many = sweep_finals(str(work / "sweep")), sweep_finals(str(work / "sweep-many"))
    agree = sum(one[k] == separate[k] for k in separate)
    same_on_many = sum(one[k] == many[k] for k in one)

    settings = len(LEARNING_RATES) * len(ENT_COEFS)
    print(f"| PPO CartPole-v1, {settings} settings x {args.seeds} seeds | wall seconds | "
          f"speed-up | settings whose returns equal the separate runs' |")
    print("|---|---:|---:|---:|")
    print(f"| {settings} separate train.py commands | {separate_seconds:.1f} | 1.0 | - |")
    print(f"| one train.py --sweep, 1 device | {sweep_seconds:.1f} | "
          f"{separate_seconds / sweep_seconds:.1f} | {agree} of {settings} |")
    print(f"| one train.py --sweep, {args.devices} devices | {many_seconds:.1f} | "
          f"{separate_seconds / many_seconds:.1f} | {same_on_many} of {settings} equal "
          f"to 1 device's |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
