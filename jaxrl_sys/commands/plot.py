"""Learning curves to PNG: `python scripts/plot.py RUN_DIR [RUN_DIR ...] --out curves.png`.

Reads each run's `metrics.jsonl` and `run.json`. Runs of the same agent and env are one
curve: the mean over their seeds and a band from the lowest to the highest seed. A run
trained with `--seeds N` already logs the mean, min and max over its seeds; several runs
(e.g. one per `--seed`) are put on a common x grid and combined. Two panels: return against
env steps (per seed) and against training wall time. `--results FILE` adds the rows of a
benchmark suite's results (e.g. results/minatar.json; `--env` picks one env's rows): their
greedy returns per chunk, mean and range over seeds, beside the runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from jaxrl_sys.runtime.run_spec import read_run_record


class PlotError(Exception):
    """Bad input (a missing run directory, a run with no metrics): one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise PlotError(message)


def load_run(run_dir: Path, metric: str) -> dict:
    """One run's curve: label, x (env steps per seed, seconds) and y (mean, low, high)."""
    metrics_file = run_dir / "metrics.jsonl"
    if not run_dir.is_dir():
        raise PlotError(f"no run directory at {run_dir}")
    if not metrics_file.is_file():
        raise PlotError(f"{run_dir} has no metrics.jsonl")
    config = read_run_record(run_dir)
    if not config and (run_dir / "config.json").is_file():  # runs from before run.json
        config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    rows = []
    for line in metrics_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get(metric) is not None:
            rows.append(row)
    if not rows:
        raise PlotError(f"{run_dir} has no values of {metric!r}")
    seeds = config.get("seeds") or [0]
    steps = np.array([r.get("env_steps_per_seed", r["env_steps"] / len(seeds)) for r in rows])
    seconds = np.array([r.get("train_seconds", r.get("wall_time", np.nan)) for r in rows])
    mean = np.array([r[metric] for r in rows], float)
    if metric == "mean_return":
        low = np.array([r.get("min_return") if r.get("min_return") is not None else m
                        for r, m in zip(rows, mean)], float)
        high = np.array([r.get("max_return") if r.get("max_return") is not None else m
                         for r, m in zip(rows, mean)], float)
    else:
        low, high = mean, mean
    label = f"{config.get('agent', '?')} on {config.get('env', run_dir.name)}"
    return dict(label=label, steps=steps, seconds=seconds, mean=mean, low=low, high=high,
                seeds=len(seeds))


def load_results(path: Path, env: Optional[str]) -> list[dict]:
    """The curves of a benchmark suite's results file: one per row (agent, env), the greedy
    return's mean and range over seeds at each chunk, seconds prorated over the chunks."""
    if not path.is_file():
        raise PlotError(f"no results file at {path}")
    rows = json.loads(path.read_text(encoding="utf-8")).get("rows", [])
    curves = []
    for row in rows:
        if (env is not None and row.get("env") != env) or not row.get("eval_returns"):
            continue
        returns = np.asarray(row["eval_returns"], float)  # [chunks, seeds]
        steps = np.asarray(row["env_steps"], float)
        seconds = steps / steps[-1] * float(row.get("train_seconds", np.nan))
        curves.append(dict(label=f"{row['agent']} on {row['env']} ({path.name})", steps=steps,
                           seconds=seconds, mean=returns.mean(1), low=returns.min(1),
                           high=returns.max(1), seeds=returns.shape[1]))
    if not curves:
        raise PlotError(f"{path} has no rows with greedy returns"
                        + (f" for {env}" if env else ""))
    return curves


def combine(runs: list[dict], x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Curves of several runs on a common grid of `x`: seed-weighted mean, lowest, highest."""
    if len(runs) == 1:
        run = runs[0]
        return run[x], run["mean"], run["low"], run["high"]
    end = min(run[x][-1] for run in runs)
    grid = np.linspace(max(run[x][0] for run in runs), end, 100)
    means = np.stack([np.interp(grid, run[x], run["mean"]) for run in runs])
    weights = np.array([run["seeds"] for run in runs], float)[:, None]
    lows = np.stack([np.interp(grid, run[x], run["low"]) for run in runs])
    highs = np.stack([np.interp(grid, run[x], run["high"]) for run in runs])
    mean = (means * weights).sum(0) / weights.sum()
    return grid, mean, lows.min(0), highs.max(0)


def plot(run_dirs: Sequence[Path], out: Path, metric: str = "mean_return",
         results: Sequence[Path] = (), env: Optional[str] = None) -> int:
    """Draw the curves of `run_dirs` (and of the `results` files' rows for `env`) into
    `out` (PNG); returns the number of curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[dict]] = defaultdict(list)
    for run_dir in run_dirs:
        run = load_run(Path(run_dir), metric)
        groups[run["label"]].append(run)
    for path in results:
        for curve in load_results(Path(path), env):
            groups[curve["label"]].append(curve)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for label, runs in groups.items():
        seeds = sum(run["seeds"] for run in runs)
        for ax, x in zip(axes, ("steps", "seconds")):
            grid, mean, low, high = combine(runs, x)
            (line,) = ax.plot(grid, mean, label=f"{label} ({seeds} seed{'s' * (seeds > 1)})")
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    axes[0].set_xlabel("env steps (per seed)")
    axes[1].set_xlabel("training time (s)")
    for ax in axes:
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return len(groups)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run directories")
    parser.add_argument("--out", type=Path, default=Path("curves.png"), help="PNG to write")
    parser.add_argument("--metric", default="mean_return", help="metric on the y axis")
    parser.add_argument("--results", type=Path, action="append", default=[],
                        help="a benchmark suite's results JSON whose rows to draw too "
                             "(repeatable)")
    parser.add_argument("--env", default=None, help="only the results rows of this env")
    try:
        args = parser.parse_args(argv)
        if args.out.suffix.lower() != ".png":
            raise PlotError(f"--out must end in .png, got {args.out}")
        if not args.runs and not args.results:
            raise PlotError("name run directories or --results files to plot")
        curves = plot(args.runs, args.out, args.metric, args.results, args.env)
    except PlotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({curves} curve{'s' * (curves > 1)} from {len(args.runs)} run(s) "
          f"and {len(args.results)} results file(s))")
    return 0



def entry() -> None:
    """The `jaxrl-plot` console entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
