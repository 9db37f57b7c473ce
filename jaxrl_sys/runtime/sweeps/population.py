"""Population training over a sweep's settings: PBT (exploit and explore between compiled
calls) and successive halving (keep the best 1/ETA at each rung). The decisions are small
NumPy functions of the members' recent returns; `pbt` and `halving` in this package apply
them to the compiled rows.

A member is a setting of the sweep with its seeds: its score is the mean over its seeds of
its last chunk's return (greedy evaluation when on, else training), and exploiting a member
copies the agent state of each of its seeds' rows from the same seed's row of the member it
copies. With `--seeds 1` (as Ray Tune runs its trials) a member is one row.

PBT follows Ray Tune's `PopulationBasedTraining`: the bottom quantile copies members drawn
from the top quantile, then each of their hyper-parameters is drawn afresh with the
resample probability, else multiplied by 1.2 or 0.8 (a value of a list moves to a neighbour).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from jaxrl_sys.runtime.sweeps.results import SettingResult, describe_setting, show_value

PERTURBATION_FACTORS = (1.2, 0.8)  # Tune's
DEFAULT_QUANTILE = 0.25  # Tune's quantile_fraction
DEFAULT_RESAMPLE = 0.25  # Tune's resample_probability


@dataclasses.dataclass(frozen=True)
class Pbt:
    """PBT's settings: exploit every `interval` chunks."""

    interval: int = 2
    quantile: float = DEFAULT_QUANTILE
    resample_probability: float = DEFAULT_RESAMPLE


@dataclasses.dataclass(frozen=True)
class Halving:
    """Successive halving: at each rung keep the best ceil(n / eta) members."""

    eta: int = 2


def member_score(result: SettingResult, in_progress: Optional[np.ndarray] = None) -> float:
    """A member's recent return: the mean over its seeds of its last chunk's return (-inf if
    its state went non-finite). A seed that finished no episode in that chunk (episodes
    longer than a chunk) counts the larger of its last chunk's return that had one and the
    return so far of its episodes in progress (`in_progress` [seeds], a lower bound), so a
    member is not ranked last for playing long episodes."""
    if not result.returns or not result.finite:
        return -math.inf
    history = np.asarray(result.returns, float)  # [chunks, seeds]
    last = history[-1].copy()
    for seed in np.flatnonzero(~np.isfinite(last)):
        earlier = history[:-1, seed][np.isfinite(history[:-1, seed])]
        candidates = [earlier[-1]] if earlier.size else []
        if in_progress is not None and np.isfinite(in_progress[seed]):
            candidates.append(float(in_progress[seed]))
        last[seed] = max(candidates) if candidates else -math.inf
    return float(last.mean())


def quantile_size(members: int, quantile: float) -> int:
    """Members in each of the top and bottom quantiles: ceil(n * q), at most n // 2 (Tune)."""
    return min(math.ceil(members * quantile), members // 2)


def ranking(scores: Sequence[float]) -> np.ndarray:
    """Member positions best first; equal scores keep their order."""
    return np.argsort(-np.asarray(scores, float), kind="stable")


def exploit_sources(scores: Sequence[float], quantile: float,
                    rng: np.random.Generator) -> np.ndarray:
    """For each member position, the position whose state it takes: its own, or (the bottom
    quantile) one drawn uniformly from the top quantile."""
    order = ranking(scores)
    k = quantile_size(len(order), quantile)
    sources = np.arange(len(order))
    if k == 0:
        return sources
    top = order[:k]
    for position in sorted(order[-k:]):
        sources[position] = top[rng.integers(k)]
    return sources


def rounded(value: float) -> float:
    """`value` to 4 significant digits, as the sweep's draws are."""
    return float(f"{float(value):.4g}")


@dataclasses.dataclass(frozen=True)
class Mutation:
    """How one hyper-parameter is explored: a list of values, or a range to draw from."""

    key: str
    values: tuple = ()  # a list's values
    scale: Optional[str] = None  # "log" or "uniform" for a range
    low: float = 0.0
    high: float = 0.0

    def draw(self, rng: np.random.Generator) -> Any:
        """A fresh value: uniform over the list, or over the range (log-uniform for "log")."""
        if self.scale is None:
            return self.values[rng.integers(len(self.values))]
        if self.scale == "log":
            value = np.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = rng.uniform(self.low, self.high)
        return rounded(value)

    def perturb(self, value: Any, rng: np.random.Generator) -> Any:
        """A list value moved one place (clipped at the ends), a number times 1.2 or 0.8."""
        if self.scale is None:
            if value not in self.values:
                return self.draw(rng)
            index = self.values.index(value) + (-1 if rng.integers(2) == 0 else 1)
            return self.values[min(max(index, 0), len(self.values) - 1)]
        return rounded(value * PERTURBATION_FACTORS[rng.integers(len(PERTURBATION_FACTORS))])


def explore(values: dict[str, Any], mutations: Sequence[Mutation], resample_probability: float,
            rng: np.random.Generator, valid: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """New hyper-parameters from a copied member's: each key drawn afresh with
    `resample_probability`, else perturbed. A value that makes the config invalid (a
    discount pushed past 1) keeps the copied one."""
    new = dict(values)
    for mutation in mutations:
        if rng.uniform() < resample_probability:
            candidate = mutation.draw(rng)
        else:
            candidate = mutation.perturb(values[mutation.key], rng)
        if valid({**new, mutation.key: candidate}):
            new[mutation.key] = candidate
    return new


def rung_ends(num_chunks: int, members: int, eta: int) -> list[int]:
    """The chunk counts at which successive halving's rungs end, the last being `num_chunks`:
    rung k of K = floor(log_eta(members)) + 1 ends after num_chunks / eta^(K-1-k) chunks, so
    each rung trains its survivors eta times as long as the one before."""
    rungs = int(math.floor(math.log(members, eta) + 1e-9)) + 1 if members > 1 else 1
    return [max(1, round(num_chunks / eta ** (rungs - 1 - k))) for k in range(rungs)]


def survivors(scores: Sequence[float], eta: int) -> list[int]:
    """Positions of the best ceil(n / eta) members, in their original order."""
    keep = math.ceil(len(scores) / eta)
    return sorted(int(i) for i in ranking(scores)[:keep])


# ----------------------------------------------------------------------------- records


@dataclasses.dataclass
class MemberHistory:
    """One member's hyper-parameters over time and whom it copied."""

    member: int
    schedule: list  # [[first chunk they apply to, {key: value}], ...]
    copied: list = dataclasses.field(default_factory=list)  # [[after chunk, member copied]]

    def values_at(self, chunk: int) -> dict[str, Any]:
        """The values that trained chunk `chunk`."""
        current = self.schedule[0][1]
        for start, values in self.schedule:
            if start <= chunk:
                current = values
        return current

    def truncate(self, next_chunk: int) -> None:
        """Forget what was decided after chunk `next_chunk - 1` (a resumed run decides it
        again)."""
        self.schedule = [s for s in self.schedule if s[0] <= next_chunk]
        self.copied = [c for c in self.copied if c[0] < next_chunk]


def describe_schedule(history: MemberHistory, keys: Sequence[str]) -> str:
    """`key: v0 → v1 (after chunk k) → ...` for the keys that changed; `–` if none did.
    Chunks count from 1 here (the records count from 0, as checkpoints do)."""
    parts = []
    for key in keys:
        steps = [(start, values[key]) for start, values in history.schedule]
        changes = [steps[0]] + [s for prev, s in zip(steps, steps[1:]) if s[1] != prev[1]]
        if len(changes) > 1:
            parts.append(f"{key}: " + " → ".join(
                show_value(v) + ("" if start == 0 else f" ({start})") for start, v in changes))
    return "; ".join(parts) or "–"


def population_markdown(results: Sequence[SettingResult], histories: Sequence[MemberHistory],
                        keys: Sequence[str], method: str) -> str:
    """sweep.md of a PBT or halving run: members ranked by how far they trained, then by
    their final return, with where they started, where they ended and (PBT) whom they
    copied."""
    by_member = {h.member: h for h in histories}
    ranked = sorted(results, key=lambda r: (len(r.returns), member_score(r)), reverse=True)
    pbt = method == "pbt"
    head = ["rank", "member", "started as", *(["final values"] if pbt else []), "env steps",
            "final return"]
    head += ["copied (after chunk: member)", "schedule (after chunk)"] if pbt else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * 2 + "---|" * (len(head) - 2)]
    for rank, result in enumerate(ranked, 1):
        history = by_member[result.index]
        final = np.asarray(result.final, float)
        cells = [str(rank), str(result.index), describe_setting(history.schedule[0][1]),
                 *([describe_setting(history.schedule[-1][1])] if pbt else []),
                 f"{result.env_steps[-1]:,}" if result.env_steps else "0",
                 (f"{final.mean():.1f} ± {final.std():.1f}" if result.finite
                  else "diverged (non-finite)")]
        if pbt:
            cells.append(", ".join(f"{c + 1}: {m}" for c, m in history.copied) or "–")
            cells.append(describe_schedule(history, keys))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_population(results: Sequence[SettingResult], histories: Sequence[MemberHistory],
                    keys: Sequence[str], chunk_steps: int, path: Path) -> None:
    """The members' return curves above one panel per hyper-parameter with its schedule."""
    import matplotlib  # lazy: ~2 s to import with pyplot, paid only by a sweep's end

    matplotlib.use("Agg")  # chosen here, not on import: a user's own backend stays theirs
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen

    fig, axes = plt.subplots(1 + len(keys), 1, figsize=(7, 3 + 2 * len(keys)), sharex=True,
                             squeeze=False)
    colours = plt.get_cmap("tab20")
    by_member = {h.member: h for h in histories}
    for result in results:
        if not result.returns:
            continue
        colour = colours(result.index % 20)
        axes[0, 0].plot(result.env_steps, [np.mean(r) for r in result.returns], color=colour,
                        linewidth=1, label=str(result.index))
        history = by_member[result.index]
        chunks = np.arange(len(result.returns))
        for row, key in enumerate(keys, 1):
            values = [history.values_at(int(c))[key] for c in chunks]
            axes[row, 0].step((chunks + 1) * chunk_steps, values, where="pre", color=colour,
                              linewidth=1)
    axes[0, 0].set_ylabel("return")
    axes[0, 0].legend(fontsize=6, ncol=4, title="member", title_fontsize=6)
    for row, key in enumerate(keys, 1):
        axes[row, 0].set_ylabel(key)
        if all(v > 0 for h in histories for _, vs in h.schedule for v in [vs[key]]
               if isinstance(v, (int, float))):
            axes[row, 0].set_yscale("log")
    axes[-1, 0].set_xlabel("env steps per seed")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
