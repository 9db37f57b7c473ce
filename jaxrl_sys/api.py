"""The Python API in one place: `run` and `sweep` with this package's agents and envs.

`jaxrl_sys.runtime` takes the agent loader and env registry from its caller (it never imports
agents or envs); these wrappers hand in `jaxrl_sys.agents.load` and `jaxrl_sys.envs` unless the
caller gives others (a registry with a user's own envs, an agent of one's own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

from jaxrl_sys.runtime.run_spec import EnvRegistry, RunSpec


def _defaults(load_agent: Optional[Callable[[str], Any]],
              registry: Optional[EnvRegistry]) -> tuple[Callable[[str], Any], EnvRegistry]:
    from jaxrl_sys import agents, envs

    return load_agent or agents.load, registry or envs


def check_pairing(spec: RunSpec, load_agent: Callable[[str], Any], registry: EnvRegistry) -> None:
    """Refuse, in one line, an agent without self-play on a two-player game (`TicTacToe-v0`,
    `pgx:*`): it would play both sides as one agent and ignore the legal-move masks. Reads only
    names and params: no env is built and no device touched."""
    from jaxrl_sys import agents
    from jaxrl_sys.core.config import split_env_overrides
    from jaxrl_sys.runtime.cli import UsageError

    module = load_agent(spec.agent)
    env_name = spec.env or module.DEFAULT_ENV
    _, env_kwargs = split_env_overrides(list(spec.overrides))
    num_players = getattr(registry, "num_players", lambda name, **params: 1)
    if module.SELF_PLAY or num_players(env_name, **env_kwargs) < 2:
        return
    players = [name for name in agents.names() if agents.load(name).SELF_PLAY]
    raise UsageError(f"{env_name} is a two-player game, which agent {spec.agent!r} does not play "
                     "(no self-play, no legal-move masks); train it with "
                     + " or ".join(f"--agent {name}" for name in players))


def run(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
        registry: Optional[EnvRegistry] = None, *, resume: Union[str, Path, None] = None,
        **kwargs: Any):
    """Train `spec` (checked completely before anything is created) and return its
    `RunOutcome` (summary, run directory). See `jaxrl_sys.runtime.session.run`."""
    from jaxrl_sys.runtime.session import run as run_session

    load_agent, registry = _defaults(load_agent, registry)
    check_pairing(spec, load_agent, registry)
    return run_session(spec, load_agent, registry, resume=resume, **kwargs)


def sweep(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
          registry: Optional[EnvRegistry] = None, *, resume: Union[str, Path, None] = None):
    """Train every setting of `spec.sweep` x `spec.seeds` as one compiled program and return
    the `SweepOutcome`. See `jaxrl_sys.runtime.sweeps.sweep`."""
    from jaxrl_sys.runtime.sweeps import sweep as run_sweep

    load_agent, registry = _defaults(load_agent, registry)
    check_pairing(spec, load_agent, registry)
    return run_sweep(spec, load_agent, registry, resume=resume)


def resolve(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
            registry: Optional[EnvRegistry] = None, saved_run: Union[str, Path, None] = None):
    """`spec` checked and resolved (agent module, env, config), touching no device."""
    from jaxrl_sys.runtime.run_spec import resolve as resolve_spec

    load_agent, registry = _defaults(load_agent, registry)
    return resolve_spec(spec, load_agent, registry, saved_run=saved_run)
