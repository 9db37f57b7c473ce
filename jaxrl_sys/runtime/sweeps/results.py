"""A sweep's results: one `SettingResult` per setting (curves over seeds), the ranked
table (`SweepOutcome.table()` as data, `.markdown()` for sweep.md), sweep.json and sweep.png.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

SWEEP_FILE = "sweep.json"


def describe_setting(setting: dict) -> str:
    """`key=value, ...` of one setting, as the tables and progress lines show it."""
    return ", ".join(f"{k}={show_value(v)}" for k, v in setting.items())


def show_value(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclasses.dataclass
class SettingResult:
    """One setting's curves over its seeds and what the table shows of them."""

    index: int
    values: dict
    env_steps: list[int]  # per seed, at each chunk end
    returns: list[list[float]]  # [chunks][seeds]: greedy evaluation, else training return
    seconds: list[float]  # training seconds of its group at each chunk end
    finite: bool = True

    @property
    def final(self) -> np.ndarray:
        return np.asarray(self.returns[-1], float) if self.returns else np.full(1, np.nan)

    @property
    def best_mean(self) -> float:
        means = [float(np.nanmean(r)) for r in self.returns if np.isfinite(r).any()]
        return max(means) if means else float("nan")

    def steps_to(self, threshold: Optional[float]) -> Optional[int]:
        """Env steps per seed at the first chunk whose mean over seeds reaches `threshold`."""
        if threshold is None:
            return None
        for steps, returns in zip(self.env_steps, self.returns):
            if np.isfinite(returns).all() and float(np.mean(returns)) >= threshold:
                return int(steps)
        return None


def score(result: SettingResult) -> tuple:
    final = float(np.mean(result.final)) if np.isfinite(result.final).all() else -math.inf
    best = result.best_mean if math.isfinite(result.best_mean) else -math.inf
    return (result.finite, final, best)


@dataclasses.dataclass
class SweepOutcome:
    """A finished sweep: its directory, one result per setting (setting order), the table."""

    run_dir: Path
    results: list[SettingResult]
    threshold: Optional[float]
    seeds: list[int]
    train_seconds: float
    keys: list[str]

    def ranked(self) -> list[SettingResult]:
        return sorted(self.results, key=score, reverse=True)

    def table(self) -> list[dict[str, Any]]:
        """The ranked table as data: one dict per setting."""
        rows = []
        for rank, result in enumerate(self.ranked(), 1):
            final = result.final
            rows.append({
                "rank": rank, "setting": result.index, **result.values,
                "final_mean": float(np.mean(final)), "final_std": float(np.std(final)),
                "best_mean": result.best_mean, "finite": result.finite,
                "steps_to_threshold": result.steps_to(self.threshold),
            })
        return rows

    def markdown(self) -> str:
        head = ["rank", "setting", *self.keys, "final return", "best mean return"]
        if self.threshold is not None:
            head.append(f"steps to {self.threshold:g}")
        lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        for row in self.table():
            cells = [str(row["rank"]), str(row["setting"]),
                     *[show_value(row[k]) for k in self.keys],
                     (f"{row['final_mean']:.1f} ± {row['final_std']:.1f}" if row["finite"]
                      else "diverged (non-finite)"),
                     f"{row['best_mean']:.1f}"]
            if self.threshold is not None:
                steps = row["steps_to_threshold"]
                cells.append(f"{steps:,}" if steps is not None else "–")
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def save_outcome(run_dir: Path, outcome_data: dict) -> None:
    """Write sweep.json atomically (it is rewritten after every chunk)."""
    path = Path(run_dir) / SWEEP_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(outcome_data, indent=1), encoding="utf-8")
    tmp.replace(path)


def load_outcome(run_dir: Union[str, Path]) -> dict:
    """sweep.json of a sweep run ({} if there is none yet)."""
    try:
        return json.loads((Path(run_dir) / SWEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def plot_outcome(outcome: SweepOutcome, path: Path) -> None:
    """One curve per setting: mean over seeds against env steps per seed."""
    import matplotlib  # lazy: ~2 s to import with pyplot, paid only by a sweep's end

    matplotlib.use("Agg")  # chosen here, not on import: a user's own backend stays theirs
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for result in outcome.results:
        if not result.returns:
            continue
        mean = np.asarray([np.mean(r) for r in result.returns])
        ax.plot(result.env_steps, mean, label=f"{result.index}: {describe_setting(result.values)}")
    if outcome.threshold is not None:
        ax.axhline(outcome.threshold, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("env steps per seed")
    ax.set_ylabel(f"return (mean of {len(outcome.seeds)} seeds)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
