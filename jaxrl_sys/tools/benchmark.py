"""Benchmark suites: train the shipped defaults of every suited (agent, env) pair of a suite,
evaluate greedily, and compare the final returns with published ones.

A user who picks an env from the README expects `--env X` alone to learn it; this module
measures that. Each pair trains with `learning_check.run_case` (seeds vmapped, the chunking
and placement of `scripts/train.py`, greedy evaluation at every chunk end), so a benchmark row
is what the user's own command would give. Rows are saved as they finish: an interrupted
suite continues where it stopped. Reference returns live in `references.json` beside this
module, each with its source.

The agent loader and the env registry are handed in by the caller: jaxrl_sys never imports
`agents` or `envs`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np

from jaxrl_sys.tools import learning_check as lc
from jaxrl_sys.core.config import ConfigError

SUITES: dict[str, tuple[str, ...]] = {
    "classic": ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
                "MountainCarContinuous-v0"),
    "minatar": ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar",
                "SpaceInvaders-MinAtar", "Seaquest-MinAtar"),
    "bsuite": ("Catch-bsuite",),
    # teams on JaxMARL (the jaxmarl extra): team-sum return on MPE, greedy win rate on SMAX
    "marl": ("jaxmarl:MPE_simple_spread_v3", "jaxmarl:SMAX:3m", "jaxmarl:SMAX:2s3z"),
}
EVAL_EPISODES = 32  # greedy episodes per seed at every chunk end
CHUNKS = 20  # points on each learning curve (train.py's default chunking)
QUICK_STEPS = 20_000  # --quick: env steps per seed (or the default budget if smaller)
REFERENCES_FILE = Path(__file__).with_name("references.json")


class BenchmarkError(ValueError):
    """Bad input (unknown suite or agent, no runs left to do): one line, exit code 2."""


@dataclasses.dataclass(frozen=True)
class Reference:
    """A published return for an env, with the agent and budget that reached it."""

    env: str
    value: float
    agent: str
    steps: Optional[int]
    source: str
    url: str = ""


def load_references(path: Path = REFERENCES_FILE) -> dict[str, Reference]:
    """env name -> its published reference return."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    return {r["env"]: Reference(r["env"], float(r["return"]), r["agent"], r.get("steps"),
                                r["source"], r.get("url", "")) for r in rows}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One planned benchmark run: an agent's shipped defaults on one env. `config` is the
    config as JSON data: a saved row is reused only if it was trained with the same one."""

    agent: str
    env: str
    total_steps: int
    config: dict = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.agent}:{self.env}"


@dataclasses.dataclass
class Row:
    """A finished run: every seed's greedy and training curves and its timings."""

    agent: str
    env: str
    total_steps: int
    seeds: list[int]
    env_steps: list[int]  # per seed, at every chunk end
    eval_returns: list[list[float]]  # [chunks][seeds], greedy
    train_returns: list[list[float]]  # [chunks][seeds], episodes finished in the chunk
    seconds: float  # wall, compilation included
    train_seconds: float  # the chunks (training and evaluations)
    measured: str = ""  # date, machine and devices of the run

    @property
    def final(self) -> np.ndarray:
        """[seeds] greedy return at the end."""
        return np.asarray(self.eval_returns[-1], float)

    @property
    def env_steps_per_second(self) -> float:
        """Env steps over all seeds per second of the chunks."""
        return self.total_steps * len(self.seeds) / max(self.train_seconds, 1e-9)


def ratio_to_reference(value: float, reference: float) -> float:
    """How close `value` is to `reference`: 1 means equal, above 1 better (for negative
    returns, where higher is better too, reference / value). NaN if the signs differ."""
    if reference > 0:
        return value / reference
    if reference < 0 and value < 0:
        return reference / value
    return math.nan


def plan(suite: str, agent_names: Sequence[str], load_agent: Callable[[str], Any],
         registry: Any, quick: bool = False, only_envs: Sequence[str] = ()
         ) -> tuple[list[Entry], list[str]]:
    """The runs of `suite` (or of its envs in `only_envs`) for `agent_names`, and one line
    per pair left out and why.

    A pair is left out when the agent refuses the env (e.g. DQN on continuous actions): the
    agent's own `make` decides, so the rule is written once; and when one is a team and the
    other is not (agents whose `PLAYS` is "team" learn `jaxmarl:` envs only).
    """
    if suite not in (*SUITES, "all"):
        raise BenchmarkError(f"unknown suite {suite!r}; known: {', '.join((*SUITES, 'all'))}")
    envs = [e for name in SUITES for e in SUITES[name]] if suite == "all" else SUITES[suite]
    unknown = [e for e in only_envs if e not in envs]
    if unknown:
        raise BenchmarkError(f"{', '.join(unknown)} not in suite {suite!r}; its envs: "
                             f"{', '.join(envs)}")
    if only_envs:
        envs = [e for e in envs if e in only_envs]
    modules = {name: load_agent(name) for name in agent_names}
    entries, skipped = [], []
    for env_name in envs:
        env = registry.make(env_name)
        for name, module in modules.items():
            if (module.PLAYS == "team") != registry.is_multi_agent(env_name):
                skipped.append(f"{name} on {env_name}: team agents learn team envs only")
                continue
            config = module.default_config(env_name)
            try:
                module.make(env, config)
            except ConfigError as error:
                skipped.append(f"{name} on {env_name}: {error}")
                continue
            steps = min(config.total_steps, QUICK_STEPS) if quick else config.total_steps
            config = dataclasses.replace(config, total_steps=int(steps))
            as_data = json.loads(json.dumps(dataclasses.asdict(config)))
            entries.append(Entry(name, env_name, int(steps), as_data))
    if not entries:
        raise BenchmarkError(f"no agent of {', '.join(agent_names)} suits suite {suite!r}")
    return entries, skipped


def run_entry(entry: Entry, module: Any, registry: Any, seeds: Sequence[int],
              num_devices: int = 1, on_chunk: Optional[Callable[[int, int], None]] = None
              ) -> Row:
    """Train one entry over `seeds` (vmapped) with greedy evaluation at every chunk end."""
    case = lc.LearningCase(entry.env, math.nan, agent=entry.agent, eval_episodes=EVAL_EPISODES,
                           overrides=(("total_steps", entry.total_steps),), chunks=CHUNKS)
    result = lc.run_case(case, module, registry, seeds, num_devices=num_devices,
                         on_chunk=on_chunk)
    steps = int(result.env_steps[-1])  # the budget rounded to whole iterations
    measured = f"{time.strftime('%Y-%m-%d')}, {describe_machine()}, {num_devices} device(s)"
    return Row(entry.agent, entry.env, steps, list(result.seeds), list(result.env_steps),
               np.asarray(result.eval_returns, float).tolist(),
               np.asarray(result.train_returns, float).tolist(), result.seconds,
               float(result.train_seconds or result.seconds), measured)


def _matches(row: dict, entry: Entry, seeds: Sequence[int]) -> bool:
    return (row["agent"] == entry.agent and row["env"] == entry.env
            and row["seeds"] == list(seeds) and row.get("planned_steps") == entry.total_steps
            and row.get("config") == entry.config)


def run_suite(entries: Sequence[Entry], load_agent: Callable[[str], Any], registry: Any,
              seeds: Sequence[int], results_file: Path, num_devices: int = 1,
              progress: Optional[Callable[[str, int, int], None]] = None,
              fresh: bool = False, agent_order: Sequence[str] = ()) -> list[Row]:
    """Run every entry, saving `results_file` after each; rows already saved there for the
    same entry and seeds are kept (not re-run) unless `fresh`, and saved rows of other
    (agent, env) pairs stay in the file (a suite run agent by agent makes one table).

    `progress(label, done_chunks, total_chunks)` is called at every chunk; the label names
    the run, its place in the suite and the suite's estimated time left. Rows are saved by
    env, then by agent in `agent_order` (the registry's; default: the entries').
    """
    order = list(agent_order) or list(dict.fromkeys(e.agent for e in entries))
    saved = []
    if results_file.is_file() and not fresh:
        saved = json.loads(results_file.read_text(encoding="utf-8")).get("rows", [])
    kept = [next((r for r in saved if _matches(r, e, seeds)), None) for e in entries]
    planned = {(e.agent, e.env) for e in entries}
    others = [r for r in saved if (r["agent"], r["env"]) not in planned]
    steps_left = sum(e.total_steps for e, k in zip(entries, kept) if k is None)
    ran_steps = ran_seconds = 0.0  # this call's finished runs, for the ETA
    records: list[dict] = []
    for index, (entry, record) in enumerate(zip(entries, kept)):
        if record is None:
            eta = (f"suite ETA {_duration(ran_seconds / ran_steps * steps_left)}" if ran_steps
                   else "suite ETA after the first run")
            label = f"[{index + 1}/{len(entries)}] {entry.agent} {entry.env} · {eta}"
            on_chunk = ((lambda done, total, label=label: progress(label, done, total))
                        if progress else None)
            row = run_entry(entry, load_agent(entry.agent), registry, seeds, num_devices,
                            on_chunk)
            steps_left -= entry.total_steps
            ran_steps += entry.total_steps
            ran_seconds += row.seconds
            record = {**dataclasses.asdict(row), "planned_steps": entry.total_steps,
                      "config": entry.config}
        records.append(record)
        others = _rows_of_other_pairs(results_file, {(r["agent"], r["env"]) for r in records},
                                      others)
        _save(results_file, _in_suite_order(records + others, order))
    return [_row_of(r) for r in _in_suite_order(records + others, order)]


def _rows_of_other_pairs(results_file: Path, pairs: set[tuple[str, str]],
                         known: list[dict]) -> list[dict]:
    """The rows saved in `results_file` now for (agent, env) pairs not in `pairs`, read again
    before each save so that a suite run in another process at the same time (say, another
    agent) loses none of its rows; `known` are kept when the file cannot be read."""
    try:
        saved = json.loads(results_file.read_text(encoding="utf-8")).get("rows", [])
    except (OSError, ValueError):
        saved = known
    merged = {(r["agent"], r["env"]): r for r in known}
    merged.update({(r["agent"], r["env"]): r for r in saved})
    return [r for key, r in merged.items() if key not in pairs]


def _in_suite_order(records: list[dict], agent_order: Sequence[str]) -> list[dict]:
    """Rows ordered by env (as the suites list them), then agent (in `agent_order`)."""
    env_order = [e for envs in SUITES.values() for e in envs]
    rank = lambda names, name: names.index(name) if name in names else len(names)  # noqa: E731
    return sorted(records, key=lambda r: (rank(env_order, r["env"]), r["env"],
                                          rank(agent_order, r["agent"]), r["agent"]))


def load_rows(results_file: Path) -> list[Row]:
    """The rows saved in a suite's results file."""
    try:
        records = json.loads(Path(results_file).read_text(encoding="utf-8"))["rows"]
    except (OSError, ValueError, KeyError) as error:
        raise BenchmarkError(f"cannot read saved rows from {results_file}: {error}") from None
    if not records:
        raise BenchmarkError(f"{results_file} holds no rows")
    return [_row_of(r) for r in records]


def _row_of(record: dict) -> Row:
    fields = {f.name for f in dataclasses.fields(Row)}
    return Row(**{k: v for k, v in record.items() if k in fields})


def _save(path: Path, records: list[dict]) -> None:
    """Write atomically, so an interrupted suite never leaves a torn results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"rows": records}, indent=1), encoding="utf-8")
    tmp.replace(path)


def _duration(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m"


def _format_return(values: np.ndarray) -> str:
    return f"{np.mean(values):.1f} ± {np.std(values):.1f}"


def format_table(rows: Sequence[Row], references: dict[str, Reference],
                 dates: bool = False) -> str:
    """A markdown table: one row per run, greedy final return (mean ± std over seeds) against
    the env's reference; with `dates`, a last column with the day each row was measured."""
    lines = ["| env | agent | steps | greedy return | training return | reference | ratio "
             "| seconds | env-steps/s |" + (" measured |" if dates else ""),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---|" if dates else "")]
    for row in rows:
        reference = references.get(row.env)
        final = row.final
        train = np.asarray(row.train_returns[-1], float)
        train_text = _format_return(train[np.isfinite(train)]) if np.isfinite(train).any() \
            else "–"
        if reference is not None:
            ratio = ratio_to_reference(float(np.mean(final)), reference.value)
            ref_text, ratio_text = f"{reference.value:g}", (
                "–" if math.isnan(ratio) else f"{ratio:.2f}")
        else:
            ref_text = ratio_text = "–"
        lines.append(
            f"| {row.env} | {row.agent} | {row.total_steps:,} | {_format_return(final)} "
            f"| {train_text} | {ref_text} | {ratio_text} | {row.seconds:.0f} "
            f"| {row.env_steps_per_second:,.0f} |"
            + (f" {row.measured.split(',')[0] or '–'} |" if dates else ""))
    return "\n".join(lines)


def format_sources(rows: Sequence[Row], references: dict[str, Reference]) -> str:
    """The source of every reference the table uses, one line each."""
    used = sorted({row.env for row in rows if row.env in references})
    return "\n".join(f"- {env}: {references[env].value:g} ({references[env].agent}, "
                     f"{references[env].source})" for env in used)


def plot_curves(rows: Sequence[Row], references: dict[str, Reference], path: Path) -> None:
    """One panel per env: each agent's greedy return (mean over seeds, band from the lowest
    to the highest seed) against env steps per seed, and the reference as a dashed line."""
    import matplotlib  # lazy: ~2 s to import with pyplot, paid only where a suite plots

    matplotlib.use("Agg")  # chosen here, not on import: a user's own backend stays theirs
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen
    from matplotlib.ticker import EngFormatter  # lazy: with pyplot

    env_names = list(dict.fromkeys(row.env for row in rows))
    columns = min(3, len(env_names))
    lines = math.ceil(len(env_names) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5 * columns, 3.6 * lines), squeeze=False)
    for ax, env_name in zip(axes.flat, env_names):
        for row in (r for r in rows if r.env == env_name):
            curves = np.asarray(row.eval_returns, float)
            ax.plot(row.env_steps, curves.mean(axis=1), label=row.agent)
            ax.fill_between(row.env_steps, curves.min(axis=1), curves.max(axis=1), alpha=0.2)
        if env_name in references:
            ax.axhline(references[env_name].value, color="k", linestyle="--", linewidth=1,
                       label="reference")
        ax.set_title(env_name)
        ax.xaxis.set_major_formatter(EngFormatter())  # 100k, 2M: labels that do not collide
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel("greedy return")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(env_names):]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(rows: Sequence[Row], references: dict[str, Reference], out_dir: Path,
                 name: str) -> tuple[Path, Path]:
    """`<name>.md` (what was measured where, the table, reference sources) and `<name>.png`
    (curves)."""
    table_file, image_file = out_dir / f"{name}.md", out_dir / f"{name}.png"
    header = f"Suite {name}: {describe_rows(rows)}"
    table_file.write_text(f"{header}\n\n{format_table(rows, references)}\n\nReferences:\n\n"
                          f"{format_sources(rows, references)}\n", encoding="utf-8")
    plot_curves(rows, references, image_file)
    return table_file, image_file


def describe_rows(rows: Sequence[Row]) -> str:
    """What a suite's table holds and where its rows were measured, in two sentences."""
    seeds = sorted({len(row.seeds) for row in rows})
    where = "; ".join(sorted({row.measured for row in rows if row.measured})) or "unknown"
    return (f"{'/'.join(map(str, seeds))} seeds per row, greedy return of {EVAL_EPISODES} "
            f"episodes per seed at the end of training (mean ± std over seeds). Measured "
            f"{where}. Seconds: wall time of the run, compilation included; env-steps/s: all "
            "seeds' steps per second of training and evaluation.")


RESULTS_PAGE = Path("docs") / "results.md"  # the docs site's results page, from the repo root
PAGE_IMAGES = Path("assets") / "results"  # the suites' curves, copied there beside the page
PAGE_INTRO = """\
# Results: the shipped defaults against published returns

<!-- Generated by `python scripts/benchmark.py --page` (jaxrl-benchmark --page) from
results/<suite>.json: do not edit; run the command again after a benchmark run. -->

Every suited (agent, env) pair of a suite, trained with the env's default config (what
`jaxrl-train --env X` trains), seeds vmapped, evaluated greedily at every chunk end, by
`python scripts/benchmark.py --suite <suite>` (the `jaxrl-benchmark` command; see
[Commands](commands.md#jaxrl-benchmark)). Reference: a published return for the env (its
source is listed under each table). Ratio: return / reference (reference / return for
negative returns): 1 is the reference, above 1 better. How the defaults were chosen, and why a
row misses its reference: [Results in detail](results-notes.md).
"""


def results_page(results_dir: Path, suites: Sequence[str] = tuple(SUITES),
                 references: Optional[dict[str, Reference]] = None) -> tuple[str, list[Path]]:
    """The docs results page (markdown) from the saved rows of every suite in `suites` that has
    a `<suite>.json` in `results_dir`, and the curve images it shows (to copy beside it)."""
    references = load_references() if references is None else references
    sections, images = [PAGE_INTRO], []
    for suite in suites:
        results_file = Path(results_dir) / f"{suite}.json"
        if not results_file.is_file():
            continue
        rows = load_rows(results_file)
        section = [f"## {suite}", describe_rows(rows), format_table(rows, references, dates=True)]
        image = results_file.with_suffix(".png")
        if image.is_file():
            section.append(f"![{suite} suite: greedy return against env steps]"
                           f"({(PAGE_IMAGES / image.name).as_posix()})")
            images.append(image)
        section.append(f"References:\n\n{format_sources(rows, references)}")
        sections.append("\n\n".join(section) + "\n")
    if len(sections) == 1:
        raise BenchmarkError(f"no saved suite ({', '.join(suites)}) in {results_dir}")
    return "\n".join(sections), images


def write_results_page(results_dir: Path, page: Path = RESULTS_PAGE) -> Path:
    """Write `results_page` to `page` and copy the curves it shows into `page`'s folder, so
    the docs tables are generated from the saved rows, never typed."""
    text, images = results_page(results_dir)
    page.parent.mkdir(parents=True, exist_ok=True)
    image_dir = page.parent / PAGE_IMAGES
    image_dir.mkdir(parents=True, exist_ok=True)
    for image in images:
        shutil.copyfile(image, image_dir / image.name)
    page.write_text(text, encoding="utf-8")
    return page


def describe_machine() -> str:
    """A short description of this machine for the report's header."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, JAX {jax.__version__} on {jax.default_backend()}"


