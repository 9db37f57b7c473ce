"""A run as data: `RunSpec`, what it resolves to (`ResolvedRun`), and the run's `run.json`.

A RunSpec is built from train.py's flags or from Python, validated completely before anything
is created (devices, directories, processes), saved as `run.json` in the run directory and read
back by `--resume`, evaluate.py and arena.py. The agent modules and the env registry are handed
in by the caller (`resolve(spec, load_agent, registry)`): jaxrl_sys never imports them.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Union, runtime_checkable

from jaxrl_sys.core.types import AgentDef, HostAgentDef
from jaxrl_sys.runtime.checkpoint import CHECKPOINT_DIR, CheckpointError
from jaxrl_sys.runtime.cli import UsageError
from jaxrl_sys.runtime.execution import PlacementError, check_placement
from jaxrl_sys.runtime.host.placement import HostLayout
from jaxrl_sys.core.config import (
    apply_overrides, config_from_dict, config_to_dict, split_env_overrides,
)

RUN_FILE = "run.json"
LEGACY_ARGS_FILE = "args.json"  # runs saved before run.json: train.py's flags
RUN_FILE_VERSION = 1


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything that defines a run; `None` fields take the agent's or env's default."""

    agent: str = "ppo"
    env: Optional[str] = None  # default: the agent module's DEFAULT_ENV
    overrides: tuple[str, ...] = ()  # "key=value" config fields; "env.key=value" env params
    total_steps: Optional[int] = None  # env steps per seed (overrides the config's)
    # placement
    devices: int = 1
    seeds: int = 1
    seed: int = 0  # seeds are seed .. seed+seeds-1
    # budget, evaluation and logging
    chunks: int = 20  # log points (compiled calls) per run
    eval_episodes: Optional[int] = None  # greedy episodes per chunk; None: the agent's default
    # two-player games: who greedy evaluation plays against (random, perfect, mcts:N);
    # None: the env's default (envs.make_eval)
    eval_opponent: Optional[str] = None
    target_return: Optional[float] = None  # stop once the mean return reaches it
    run_root: str = "runs"
    progress: bool = True
    wandb: Optional[str] = None  # Weights & Biases project to log to as well; None: no W&B
    # checkpoints
    checkpoint_every: int = 5  # chunks; 0: only at the end
    keep_checkpoints: int = 3
    save_replay: bool = True
    # host loop (gymnasium: and envpool: envs)
    staleness: int = 1
    step_timeout: float = 60.0
    actor_threads: int = 1  # per process, each with its own envs
    actor_devices: Optional[int] = None  # of `devices`, the acting ones; None: all (shared)
    # hyper-parameter sweep (runtime.sweeps): "key=v1,v2" grids, "key=log:lo:hi" ranges
    sweep: tuple[str, ...] = ()
    samples: int = 0  # draws of the sweep's ranges
    sweep_batching: str = "auto"  # "vmap", "map" or "auto" (see runtime.sweeps.rows.batching)
    # population training over the sweep's settings (jaxrl_sys.runtime.sweeps.population)
    pbt: bool = False  # PBT: exploit and explore every pbt_interval chunks
    pbt_interval: int = 2
    pbt_quantile: float = 0.25  # the bottom quantile copies members of the top one
    pbt_resample: float = 0.25  # probability that an explored value is drawn afresh
    halving: int = 0  # successive halving: keep the best 1/halving at each rung; 0: off
    # a run of the same agent and env whose latest learner state this run starts from (its
    # envs, replay and key fresh): offline-to-online fine-tuning, or a warm start
    init_from: Optional[str] = None

    def check(self) -> None:
        """Refuse counts that cannot work, with one line naming the field."""
        for name in ("devices", "seeds", "chunks", "keep_checkpoints", "actor_threads"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("seed", "checkpoint_every", "staleness", "samples"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.total_steps is not None and self.total_steps < 1:
            raise UsageError(f"total_steps must be >= 1, got {self.total_steps}")
        if self.eval_episodes is not None and self.eval_episodes < 0:
            raise UsageError(f"eval_episodes must be >= 0, got {self.eval_episodes}")
        if not self.step_timeout > 0:
            raise UsageError(f"step_timeout must be > 0, got {self.step_timeout}")
        if self.actor_devices is not None and not 1 <= self.actor_devices <= self.devices:
            raise UsageError(f"actor_devices must be 1 .. devices ({self.devices}), got "
                             f"{self.actor_devices}")
        if self.wandb is not None:
            self._check_wandb()
        self._check_population()

    def _check_population(self) -> None:
        """PBT and halving need a sweep, sensible settings, and only one of them."""
        for flag, on in (("--pbt", self.pbt), ("--halving", self.halving)):
            if on and not self.sweep:
                raise UsageError(f"{flag} needs --sweep (its settings are the population)")
        if self.pbt and self.halving:
            raise UsageError("--pbt and --halving are two ways to spend a population's "
                             "compute: pick one")
        if self.pbt_interval < 1:
            raise UsageError(f"--pbt-interval must be >= 1 chunk, got {self.pbt_interval}")
        if not 0 < self.pbt_quantile <= 0.5:
            raise UsageError(f"--pbt-quantile must be in (0, 0.5], got {self.pbt_quantile:g}")
        if not 0 <= self.pbt_resample <= 1:
            raise UsageError(f"--pbt-resample must be in [0, 1], got {self.pbt_resample:g}")
        if self.halving < 0 or self.halving == 1:
            raise UsageError(f"--halving ETA must be >= 2 (0: off), got {self.halving}")

    def _check_wandb(self) -> None:
        """W&B logging needs a project name, the wandb package, and a single run."""
        if not self.wandb.strip():
            raise UsageError("--wandb needs a project name")
        if self.sweep:
            raise UsageError("--wandb logs single runs; a sweep's results are its sweep.json, "
                             "sweep.md and sweep.png")
        if importlib.util.find_spec("wandb") is None:
            raise UsageError("--wandb needs the wandb package: pip install -e '.[wandb]'")

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seed, self.seed + self.seeds))

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "overrides": list(self.overrides),
                "sweep": list(self.sweep)}

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> RunSpec:
        """A spec from `to_dict`'s output; unknown keys are ignored (newer or older files)."""
        known = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in fields.items() if k in known}
        for name in ("overrides", "sweep"):
            if name in kept:
                kept[name] = tuple(kept[name])
        return cls(**kept)


@runtime_checkable
class AgentCatalog(Protocol):
    """An agent loader that also names its agents (`jaxrl_sys.agents.catalog`): refusals then
    name the agents that fit. A plain `load(name)` function works too, with shorter messages."""

    def __call__(self, name: str) -> AgentDef: ...

    def names(self) -> list[str]: ...


def agents_that(load_agent: Callable[[str], AgentDef],
                fits: Callable[[AgentDef], bool]) -> list[str]:
    """The catalog's agents for which `fits(agent)` holds ([] for a plain loader)."""
    if not isinstance(load_agent, AgentCatalog):
        return []
    return [name for name in load_agent.names() if fits(load_agent(name))]


def _naming(kind: str, names: list[str]) -> str:
    """" (<kind>: a, b)" for a non-empty list of agents, else ""."""
    return f" ({kind}: {', '.join(names)})" if names else ""


class EnvRegistry(Protocol):
    """What the run layer uses of the env registry (`jaxrl_sys.envs`)."""

    def is_host_env(self, name: str) -> bool: ...

    def is_multi_agent(self, name: str) -> bool: ...

    def make(self, name: str, **params: Any) -> Any: ...

    def make_host(self, name: str, **params: Any) -> Any: ...

    def make_eval(self, name: str, against: Optional[str] = None, **params: Any) -> Any: ...

    def num_players(self, name: str, **params: Any) -> int: ...

    def check_opponent(self, name: str, opponent: str, **params: Any) -> None: ...

    def reward_threshold(self, name: str) -> Optional[float]: ...


@dataclasses.dataclass(frozen=True)
class ResolvedRun:
    """A spec with its agent module, env name, validated config and env parameters."""

    spec: RunSpec
    module: AgentDef
    env_name: str
    config: Any
    env_kwargs: dict
    host: bool  # a gymnasium: env, run through the host loop
    eval_episodes: int

    @property
    def seeds(self) -> list[int]:
        return self.spec.seed_list

    def build(self, registry: EnvRegistry) -> tuple[Any, Any]:
        """(env, agent): the training env and the agent made from the config."""
        if self.host:  # the learner is data-parallel over "device" (host.placement)
            env = registry.make_host(self.env_name, **self.env_kwargs)
            return env, self.module.make(env, self.config)
        env = registry.make(self.env_name, **self.env_kwargs)
        return env, self.module.make(env, self.config)

    def make_eval_env(self, registry: EnvRegistry) -> Any:
        """The env greedy evaluation plays: the training env's evaluation variant, against
        the spec's opponent in a two-player game."""
        return registry.make_eval(self.env_name, against=self.spec.eval_opponent,
                                  **self.env_kwargs)


def resolve(spec: RunSpec, load_agent: Callable[[str], AgentDef],
            registry: EnvRegistry, saved_run: Optional[Union[str, Path]] = None,
            processes: int = 1, saved_record: Optional[dict[str, Any]] = None) -> ResolvedRun:
    """Check `spec` completely (counts, agent, env, config, placement); touches no device.

    `saved_run`: the run directory `spec` was loaded from; its run.json's config is used as
    saved, so that a saved run stays the run it was when the shipped defaults change.
    `saved_record`: that run.json's contents, where they come from elsewhere (a policy
    server's client rebuilding the served run without its directory).

    `processes`: how many processes the run spans (a host-loop run splits its envs over them).
    Raises UsageError, ConfigError, PlacementError or the loader's and registry's own errors,
    each one line.
    """
    spec.check()
    module = load_agent(spec.agent)
    env_name = spec.env or module.DEFAULT_ENV
    config = module.default_config(env_name)
    agent_pairs, env_kwargs = split_env_overrides(list(spec.overrides))
    refuse_mismatched_env(spec.agent, module, load_agent, registry, env_name, env_kwargs)
    if saved_record is None and saved_run is not None:
        saved_record = read_run_record(saved_run)
    saved_config = saved_record.get("config") if saved_record is not None else None
    if isinstance(saved_config, dict):
        config = config_from_dict(type(config)(), saved_config)
    else:
        if spec.total_steps is not None:
            config = dataclasses.replace(config, total_steps=spec.total_steps)
        refuse_memory_without_a_core(spec.agent, module, load_agent, agent_pairs)
        config = apply_overrides(config, agent_pairs)
    config.validate()
    host = registry.is_host_env(env_name)
    if spec.eval_opponent is not None and not host:
        registry.check_opponent(env_name, spec.eval_opponent, **env_kwargs)
    if spec.eval_episodes is not None:
        eval_episodes = spec.eval_episodes
    else:
        eval_episodes = 0 if host else module.DEFAULT_EVAL_EPISODES
    if host:
        _check_host(spec, module, config, processes)
        if spec.init_from is not None:
            raise UsageError("--init-from starts device-loop runs; host-loop envs (gymnasium:, "
                             "envpool:) keep their learner in the host loop's own checkpoint")
    else:
        if spec.init_from is not None and saved_run is None:
            _check_init_from(spec, env_name)
        if spec.actor_threads != 1 or spec.actor_devices is not None:
            raise UsageError("--actor-threads and --actor-devices are for host-loop envs "
                             "(gymnasium:, envpool:); the device loop acts on every device")
        check_placement(config.num_envs, spec.devices, eval_episodes)
        problem = module.placement_problem(config, spec.devices)
        if problem:
            raise PlacementError(problem)
    return ResolvedRun(spec, module, env_name, config, env_kwargs, host, eval_episodes)


def refuse_mismatched_env(agent: str, module: AgentDef, load_agent: Callable[[str], AgentDef],
                          registry: EnvRegistry, env_name: str, env_kwargs: dict) -> None:
    """What the agent does not play (`AgentDef.PLAYS`), in one line naming the agents that
    do: a team env (`jaxmarl:`) for a single-agent agent or the reverse, and a two-player game
    (`TicTacToe-v0`, `pgx:*`) for an agent without self-play, which would play both sides as
    one agent and ignore the legal-move masks. Reads only names and params: no env is built."""
    team_env = registry.is_multi_agent(env_name)
    if team_env and module.PLAYS != "team":
        teams = agents_that(load_agent, lambda a: a.PLAYS == "team")
        raise UsageError(f"{env_name} is a team of agents; agent {agent!r} learns one agent"
                         + _naming("multi-agent agents", teams))
    if module.PLAYS == "team" and not team_env:
        raise UsageError(f"agent {agent!r} learns teams of agents; {env_name} has one "
                         "(multi-agent envs: jaxmarl:<env>, jaxmarl:SMAX:<map>)")
    if module.PLAYS != "self_play" and registry.num_players(env_name, **env_kwargs) >= 2:
        players = agents_that(load_agent, lambda a: a.PLAYS == "self_play")
        raise UsageError(f"{env_name} is a two-player game, which agent {agent!r} does not play "
                         "(no self-play, no legal-move masks)"
                         + (f"; train it with {' or '.join(f'--agent {n}' for n in players)}"
                            if players else ""))


def refuse_memory_without_a_core(agent: str, module: AgentDef,
                                 load_agent: Callable[[str], AgentDef], pairs: list[str]) -> None:
    """A memory torso asked of an agent without one (`AgentDef.MEMORY` "none"): one line
    naming the agents that have one (rather than the generic unknown-key list)."""
    asked = any(pair.split("=", 1)[0].strip() == "memory" for pair in pairs)
    if asked and module.MEMORY == "none":
        recurrent = agents_that(load_agent, lambda a: a.MEMORY != "none")
        raise UsageError(f"--set memory=...: agent {agent!r} cannot take a memory torso"
                         + _naming("recurrent agents", recurrent))


def _check_init_from(spec: RunSpec, env_name: str) -> None:
    """The run `--init-from` names exists, trained this agent on this env, and has a
    checkpoint; whether its learner state fits is checked when it is read
    (`session.learner_from`)."""
    if spec.sweep:
        raise UsageError("--init-from starts single runs, not sweeps")
    source = load_spec(spec.init_from)
    if source.sweep:
        raise UsageError(f"--init-from {spec.init_from} is a sweep; start from one of its "
                         "settings' runs, or a single run")
    record = read_run_record(spec.init_from)
    source_env = record.get("env", source.env)
    if source.agent != spec.agent:
        raise UsageError(f"--init-from {spec.init_from} is a {source.agent} run; this run is "
                         f"{spec.agent} (--agent {source.agent})")
    if source_env != env_name:
        raise UsageError(f"--init-from {spec.init_from} trained on {source_env}; this run "
                         f"names {env_name} (--env {source_env})")
    if not [p for p in (Path(spec.init_from) / CHECKPOINT_DIR).glob("*") if p.name.isdigit()]:
        raise UsageError(f"--init-from {spec.init_from} has no checkpoint yet")


def host_layout(spec: RunSpec, config: Any, processes: int = 1) -> Any:
    """The host loop's placement counts (`jaxrl_sys.runtime.host.placement.HostLayout`)."""
    return HostLayout(num_envs=config.num_envs, devices=spec.devices,
                      actor_devices=spec.actor_devices, actor_threads=spec.actor_threads,
                      processes=processes)


def _check_host(spec: RunSpec, module: AgentDef, config: Any, processes: int) -> None:
    """What the host loop (gymnasium: and envpool: envs) does not do, as one-line usage errors."""
    if not isinstance(module, HostAgentDef):
        raise UsageError(f"agent {spec.agent!r} has no host loop (host_fns), so it cannot train "
                         "host-loop envs (gymnasium:, envpool:)")
    problem = module.host_config_problem(config)
    if problem:
        raise UsageError(problem)
    if spec.seeds != 1:
        raise UsageError("host-loop envs (gymnasium:, envpool:) run one seed through the host "
                         "loop; use --seeds 1")
    host_layout(spec, config, processes).check()
    if spec.eval_opponent is not None:
        raise UsageError("--eval-opponent is for two-player games on device, not host-loop envs")
    if spec.eval_episodes:
        raise UsageError("--eval-episodes is not available for host-loop envs; training "
                         "returns are reported")


def save_run_file(run_dir: Path, resolved: ResolvedRun) -> None:
    """Write `run.json`: the spec (what `load_spec` reads) and, for people and plots, the
    resolved agent, env, seeds and config."""
    record = {
        "version": RUN_FILE_VERSION,
        "spec": resolved.spec.to_dict(),
        "agent": resolved.spec.agent,
        "env": resolved.env_name,
        "seeds": resolved.seeds,
        "devices": resolved.spec.devices,
        "config": config_to_dict(resolved.config),
    }
    (Path(run_dir) / RUN_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def load_spec(run_dir: Union[str, Path]) -> RunSpec:
    """The spec a run in `run_dir` was started with: `run.json`, or an older run's `args.json`.

    Raises CheckpointError (one line) if `run_dir` is not a run directory.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"no run directory at {run_dir}")
    for name in (RUN_FILE, LEGACY_ARGS_FILE):
        path = run_dir / name
        if not path.is_file():
            continue
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            if name == RUN_FILE:
                return RunSpec.from_dict(stored["spec"])
            return _spec_of_flags(stored)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise CheckpointError(f"{run_dir} is not a resumable run ({name}: "
                                  f"{type(error).__name__})") from None
    raise CheckpointError(f"{run_dir} is not a resumable run (no {RUN_FILE})")


def _spec_of_flags(flags: dict[str, Any]) -> RunSpec:
    """An older run's args.json (train.py's flag names) as a spec."""
    fields = dict(flags)
    fields["progress"] = not fields.pop("no_progress", False)
    fields["save_replay"] = not fields.pop("no_save_replay", False)
    return RunSpec.from_dict(fields)


def read_run_record(run_dir: Union[str, Path]) -> dict[str, Any]:
    """`run.json` as a dict ({} if absent or unreadable): agent, env, seeds, config."""
    try:
        return json.loads((Path(run_dir) / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
