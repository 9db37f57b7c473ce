"""Learning checks: train a promised (agent, env) pair over many seeds and judge robustness.

A `LearningCase` is an agent's `LearningPromise` (its defaults.py): an env, a threshold and
how it is measured (greedy evaluation where the agent has one); `cases` builds them from the
agent registry's promises. `run_case` trains one with the same placement and driver as
`jaxrl-train`, seeds vmapped, and keeps every seed's curve; `judge` applies the robustness
rule: at least 15 of 16 seeds reach the threshold, and no seed that reached it ends more than
5% below it.

XLA's CPU code differs with the instruction set (`--xla_cpu_max_isa`), and RL turns the last
bits into another run, so `jaxrl-check-learning` runs the cases once per code-generation
setting, each in its own process (the flag must be set before JAX starts).

The agents' promises, the agent module and the env registry are handed in by the caller: the
tools never import agents or envs.
"""

from __future__ import annotations

import dataclasses
import fcntl
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

import jax
import numpy as np

from jaxrl_sys.core.evaluation import make_eval_fn
from jaxrl_sys.core.types import DatasetRecipe, LearningPromise
from jaxrl_sys.datasets import recording
from jaxrl_sys.datasets.minari_format import write_dataset
from jaxrl_sys.runtime import driver, host
from jaxrl_sys.runtime.execution import place, placement_fns
from jaxrl_sys.runtime.loops import chunking

# Code-generation settings: name -> the XLA flag that selects it ("native": none).
ISA_SETTINGS: dict[str, str] = {
    "native": "",
    "AVX512": "--xla_cpu_max_isa=AVX512",
    "AVX2": "--xla_cpu_max_isa=AVX2",
    "AVX": "--xla_cpu_max_isa=AVX",
    "SSE4_2": "--xla_cpu_max_isa=SSE4_2",
}
# /proc/cpuinfo flag that a CPU needs for each capped setting
_ISA_CPU_FLAG = {"AVX512": "avx512f", "AVX2": "avx2", "AVX": "avx", "SSE4_2": "sse4_2"}
_ISA_ORDER = ("AVX512", "AVX2", "AVX", "SSE4_2")  # widest first

# The robustness rule: seeds that must reach the threshold, and how far below it a seed
# that reached it may end (a fraction of |threshold|).
REQUIRED_FRACTION = 15 / 16
COLLAPSE_TOLERANCE = 0.05


@dataclasses.dataclass(frozen=True)
class LearningCase(LearningPromise):
    """One promised (agent, env) pair, as its learning test trains it: an agent's
    `LearningPromise` (see `jaxrl_sys.core.types`: env, threshold, how it is judged) with the
    agent's name. Its config is the agent's `default_config(env)` with the promise's
    `overrides`; `chunks` matches `jaxrl-train`'s default, so a case trains what the user's
    command trains.
    """

    agent: str = dataclasses.field(kw_only=True)

    @property
    def name(self) -> str:
        """"agent:env", and the env's params in brackets where the promise sets any."""
        params = ",".join(f"{k}={v}" for k, v in self.env_params)
        return f"{self.agent}:{self.env}" + (f"[{params}]" if params else "")


def cases(promises: Mapping[str, Sequence[LearningPromise]]) -> tuple[LearningCase, ...]:
    """Every case of the agents' promises (`jaxrl_sys.agents.promises()`), in agent order."""
    return tuple(LearningCase(**{f.name: getattr(promise, f.name)
                                 for f in dataclasses.fields(promise)}, agent=agent)
                 for agent, of_agent in promises.items() for promise in of_agent)


def find_case(name: str, known: Sequence[LearningCase]) -> LearningCase:
    """The case called `name` ("agent:env") among `known`; ValueError naming them otherwise."""
    for case in known:
        if case.name == name:
            return case
    raise ValueError(f"unknown case {name!r}; known: {', '.join(c.name for c in known)}")


def available_settings(cpuinfo: Optional[str] = None) -> tuple[list[str], str]:
    """The settings this CPU can run, and a note on those left out.

    "native" always; a capped ISA only if the CPU has it and it is below the native one
    (capping at the native ISA generates the same code as native).
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                cpuinfo = f.read()
        except OSError:
            return ["native"], "no /proc/cpuinfo: only the native setting"
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    supported = [isa for isa in _ISA_ORDER if _ISA_CPU_FLAG[isa] in flags]
    if not supported:
        return ["native"], "CPU flags not recognised: only the native setting"
    native, below = supported[0], supported[1:]
    return ["native", *below], f"native is {native} on this CPU"


class EnvRegistry(Protocol):
    """What `run_case` needs from the env package (the `envs` module satisfies it)."""

    def make(self, name: str, **params: Any) -> Any: ...
    def make_eval(self, name: str, against: Optional[str] = None, **params: Any) -> Any: ...
    def is_host_env(self, name: str) -> bool: ...
    def make_host(self, name: str, **params: Any) -> Any: ...


@dataclasses.dataclass
class CaseResult:
    """Every seed's curve of one case under one setting; [chunks, seeds] arrays."""

    case: str
    setting: str
    seeds: list[int]
    threshold: float
    env_steps: list[int]  # per seed, at the end of each chunk
    train_returns: np.ndarray  # training episodes finished in the chunk (NaN if none)
    eval_returns: Optional[np.ndarray]  # greedy evaluation at the chunk's end (NaN: none)
    seconds: float  # wall time, compilation included
    train_seconds: Optional[float] = None  # the chunks alone (evaluations included)
    devices: int = 1  # devices the seeds were trained on (data-parallel)

    @property
    def label(self) -> str:
        """The table's column name: the setting, and the device count if more than one."""
        return self.setting if self.devices == 1 else f"{self.setting}, {self.devices} devices"

    @property
    def measured(self) -> np.ndarray:
        """What the case is judged on: greedy returns if evaluated, else training returns."""
        return self.eval_returns if self.eval_returns is not None else self.train_returns

    def to_json(self) -> dict:
        as_list = lambda a: None if a is None else np.asarray(a, float).tolist()  # noqa: E731
        return {**dataclasses.asdict(self), "train_returns": as_list(self.train_returns),
                "eval_returns": as_list(self.eval_returns)}

    @classmethod
    def from_json(cls, data: Mapping) -> "CaseResult":
        data = dict(data)
        data["train_returns"] = np.asarray(data["train_returns"], float)
        if data["eval_returns"] is not None:
            data["eval_returns"] = np.asarray(data["eval_returns"], float)
        return cls(**data)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The robustness rule applied to one `CaseResult`."""

    reached: np.ndarray  # [seeds] measured >= threshold at some chunk
    final: np.ndarray  # [seeds] measured at the last chunk
    collapsed: np.ndarray  # [seeds] reached, then ended below the tolerance
    worst_seed: int
    passed: bool

    @property
    def fraction_reached(self) -> float:
        return float(np.mean(self.reached))


def collapse_floor(threshold: float) -> float:
    """The lowest final return allowed for a seed that reached `threshold`."""
    return threshold - COLLAPSE_TOLERANCE * abs(threshold)


def judge(result: CaseResult) -> Verdict:
    """At least 15/16 of seeds reach the threshold and none that did ends below the floor."""
    measured = np.nan_to_num(result.measured, nan=-np.inf)
    reached = np.any(measured >= result.threshold, axis=0)
    final = result.measured[-1]
    collapsed = reached & ~(np.nan_to_num(final, nan=-np.inf) >= collapse_floor(result.threshold))
    worst = int(np.argmin(np.nan_to_num(final, nan=-np.inf)))
    passed = bool(np.mean(reached) >= REQUIRED_FRACTION - 1e-9 and not collapsed.any())
    return Verdict(reached, final, collapsed, worst, passed)


def case_config(case: LearningCase, agent_module: Any) -> Any:
    """The agent's shipped config for the case's env with the case's overrides."""
    config = agent_module.default_config(case.env)
    return dataclasses.replace(config, **dict(case.overrides))


def recorded_dataset(recipe: DatasetRecipe, env_name: str, load_agent: Callable[[str], Any],
                     registry: EnvRegistry, root: Path) -> Path:
    """The dataset `recipe` makes on `env_name`, under `root` (made once, then reused, by
    every process sharing `root`: the first to lock it makes it): the recipe agent's shipped
    defaults trained with seed 0 on one device, then its episodes recorded as `jaxrl-record`
    records them."""
    name = re.sub(r"[^A-Za-z0-9_\-]", "_", f"{env_name}-{recipe.agent}-{recipe.policy}-"
                  f"{recipe.episodes}").lower() + "-v0"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (root / name / "data").is_dir():
            return root / name
        return _record_dataset(recipe, env_name, load_agent, registry, root, name)


def _record_dataset(recipe: DatasetRecipe, env_name: str, load_agent: Callable[[str], Any],
                    registry: EnvRegistry, root: Path, name: str) -> Path:
    """Train `recipe`'s agent and write its episodes as dataset `name` under `root`."""
    kind, epsilon = recording.parse_policy(recipe.policy)
    module = load_agent(recipe.agent)
    config = module.default_config(env_name)
    env = registry.make(env_name)
    agent = module.make(env, config)
    iters, num_chunks = chunking(config.num_iterations, 1)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=1,
                   iters_per_chunk=iters)
    trained = driver.train(runner, np.asarray([0]), num_chunks)
    state = jax.tree.map(lambda x: x[0], trained.carry.agent_state)
    policy, params = recording.behaviour_policy(
        module, agent, state, kind, epsilon, config.num_iterations * config.steps_per_iteration)
    episodes = recording.record_episodes(env, policy, params, jax.random.PRNGKey(0),
                                         recipe.episodes)
    returns = [e.total_return for e in episodes]
    return write_dataset(root, name, episodes, env.spec, env_name,
                         {"agent": recipe.agent, "policy": kind, "epsilon": epsilon,
                          "mean_return": float(np.mean(returns))},
                         f"{recipe.episodes} episodes of {recipe.agent}'s {recipe.policy} "
                         f"policy on {env_name}, a learning check's data")


def run_case(
    case: LearningCase,
    agent_module: Any,
    registry: EnvRegistry,
    seeds: Sequence[int],
    *,
    setting: str = "native",
    num_devices: int = 1,
    on_chunk: Optional[Callable[[int, int], None]] = None,
    stop_when_reached: bool = False,
    load_agent: Optional[Callable[[str], Any]] = None,
    datasets_root: Optional[Path] = None,
) -> CaseResult:
    """Train `case` for every seed (vmapped; the host loop runs them one after another).

    `on_chunk(done, total)` reports progress. The placement and chunking are those of
    `scripts/train.py` with `--chunks case.chunks`, plus greedy evaluation when asked.
    `stop_when_reached` ends a device run at the first chunk at which every seed's judged
    return is at the threshold, its curves ending there (the learning tests: the run has shown
    that it learns). An offline case first makes its promise's dataset (`recorded_dataset`,
    with `load_agent` and under `datasets_root`, a fresh temporary directory by default).
    """
    config = case_config(case, agent_module)
    if case.dataset is not None and not config.dataset:
        if load_agent is None:
            raise ValueError(f"{case.name} learns from a recorded dataset: pass load_agent")
        if datasets_root is None:  # a scratch directory, removed once the case has run
            with tempfile.TemporaryDirectory(prefix="jaxrl_sys_datasets_") as scratch:
                return run_case(case, agent_module, registry, seeds, setting=setting,
                                num_devices=num_devices, on_chunk=on_chunk,
                                stop_when_reached=stop_when_reached, load_agent=load_agent,
                                datasets_root=Path(scratch))
        path = recorded_dataset(case.dataset, case.env, load_agent, registry, datasets_root)
        config = dataclasses.replace(config, dataset=str(path))
    iters, num_chunks = chunking(config.num_iterations, case.chunks)  # as train.py chunks
    steps_per_chunk = iters * config.steps_per_iteration
    start = time.perf_counter()
    if registry.is_host_env(case.env):
        train, evals, train_seconds = _run_host(case, agent_module, registry, config, seeds,
                                                iters, num_chunks, on_chunk)
    else:
        train, evals, train_seconds = _run_device(case, agent_module, registry, config, seeds,
                                                  iters, num_chunks, num_devices, on_chunk,
                                                  stop_when_reached)
    return CaseResult(
        case=case.name, setting=setting, seeds=[int(s) for s in seeds],
        threshold=case.threshold,
        env_steps=[(c + 1) * steps_per_chunk for c in range(train.shape[0])],
        train_returns=train, eval_returns=evals, seconds=time.perf_counter() - start,
        train_seconds=train_seconds, devices=num_devices,
    )


def _run_device(case, agent_module, registry, config, seeds, iters, num_chunks, num_devices,
                on_chunk, stop_when_reached):
    env = registry.make(case.env, **dict(case.env_params))
    agent = agent_module.make(env, config)
    eval_fn = None
    if case.eval_episodes:
        eval_fn = make_eval_fn(registry.make_eval(case.env, **dict(case.env_params)),
                               agent_module.greedy_action(agent))
    runner = place(*placement_fns(agent), num_envs=config.num_envs,
                   num_devices=num_devices, iters_per_chunk=iters, eval_fn=eval_fn,
                   eval_episodes=case.eval_episodes)

    def report(summary: driver.ChunkSummary, _seconds: float) -> bool:
        if on_chunk is not None:
            on_chunk(summary.chunk + 1, num_chunks)
        return stop_when_reached and reached(summary)

    def reached(summary: driver.ChunkSummary) -> bool:
        judged = summary.eval_returns if case.eval_episodes else summary.returns
        return bool(np.all(np.asarray(judged) >= case.threshold))

    # stopping at the threshold, the driver judges each chunk before it dispatches the next
    result = driver.train(runner, np.asarray(seeds), num_chunks, report,
                          run_ahead=not stop_when_reached)
    history = result.history
    train = np.stack([h.returns for h in history])
    evals = np.stack([h.eval_returns for h in history]) if case.eval_episodes else None
    return train, evals, result.train_seconds


_HOST_EVAL_WORKERS = 2  # evaluation worker processes: more only add start-up time here


def _run_host(case, agent_module, registry, config, seeds, iters, num_chunks, on_chunk):
    """Seeds one after another; greedy evaluation (if asked) in worker processes of its own."""
    env = registry.make_host(case.env, **dict(case.env_params))
    agent = agent_module.make(env, config, axis_name=None)
    fns = agent_module.host_fns(agent)
    policy = agent_module.greedy_action(agent)
    curves, eval_curves, train_seconds = [], [], 0.0
    for i, seed in enumerate(seeds):
        evals = np.full(num_chunks, np.nan)

        def report(summary, _seconds, i=i):
            if on_chunk is not None:
                on_chunk(i * num_chunks + summary.chunk + 1, len(seeds) * num_chunks)
            return False

        def evaluate(chunk, saved, seed=seed, evals=evals):
            returns, _ = host.evaluate(env, policy, saved["agent_state"],
                                       case.eval_episodes, seed=int(seed),
                                       num_workers=_HOST_EVAL_WORKERS)
            evals[chunk] = returns.mean()

        result = host.train(
            env, fns, seed=int(seed), num_iterations=config.num_iterations,
            iters_per_chunk=iters, on_chunk=report, checkpoint_every=case.eval_every,
            on_checkpoint=evaluate if case.eval_episodes else None)
        train_seconds += result.train_seconds
        curves.append([float(h.mean_return) for h in result.history])
        eval_curves.append(evals)
    evals = np.asarray(eval_curves, float).T if case.eval_episodes else None
    return np.asarray(curves, float).T, evals, train_seconds


def format_case_table(case: LearningCase, results: Sequence[CaseResult]) -> str:
    """A markdown table for one case: a row per seed, a column per setting, then summaries.

    Each cell is the final judged return; `*` marks a seed that never reached the threshold,
    `!` one that reached it and ended below the floor. With greedy evaluation the final
    training return follows in brackets.
    """
    verdicts = [judge(r) for r in results]
    every = f", every {case.eval_every}th chunk" if case.eval_every > 1 else ""
    measure = (f"greedy, {case.eval_episodes} episodes per seed{every}" if case.eval_episodes
               else "training episodes of the last chunk")
    lines = [
        f"#### {case.name}: threshold {case.threshold:g} ({measure}), "
        f"{len(results[0].seeds)} seeds, {results[0].env_steps[-1]:,} steps per seed",
        "",
        "| seed | " + " | ".join(r.label for r in results) + " |",
        "|---:|" + "---:|" * len(results),
    ]
    for i, seed in enumerate(results[0].seeds):
        cells = []
        for r, v in zip(results, verdicts):
            mark = "!" if v.collapsed[i] else ("" if v.reached[i] else "*")
            cell = f"{v.final[i]:.1f}{mark}"
            if r.eval_returns is not None:
                cell += f" ({r.train_returns[-1, i]:.1f})"
            cells.append(cell)
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    rows = {
        "reached": [f"{int(v.reached.sum())}/{v.reached.size}" for v in verdicts],
        "collapsed": [str(int(v.collapsed.sum())) for v in verdicts],
        "worst seed": [f"{r.seeds[v.worst_seed]}: {v.final[v.worst_seed]:.1f}"
                       for r, v in zip(results, verdicts)],
        "mean final": [f"{np.nanmean(v.final):.1f}" for v in verdicts],
        "seconds": [f"{r.seconds:.0f}" for r in results],
        "verdict": ["pass" if v.passed else "FAIL" for v in verdicts],
    }
    for label, cells in rows.items():
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
