"""The Python API in one place: `run` and `sweep` with this package's agents and envs.

`jaxrl_sys.runtime` takes the agent loader and env registry from its caller (it never imports
agents or envs); these wrappers hand in `jaxrl_sys.agents.catalog` and `jaxrl_sys.envs` unless the
caller gives others (a registry with a user's own envs, an agent of one's own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

from jaxrl_sys.runtime.run_spec import EnvRegistry, RunSpec


def _defaults(load_agent: Optional[Callable[[str], Any]],
              registry: Optional[EnvRegistry]) -> tuple[Callable[[str], Any], EnvRegistry]:
    from jaxrl_sys import agents, envs

    return load_agent or agents.catalog, registry or envs


def run(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
        registry: Optional[EnvRegistry] = None, *, resume: Union[str, Path, None] = None,
        **kwargs: Any):
    """Train `spec` (checked completely before anything is created) and return its
    `RunOutcome` (summary, run directory). See `jaxrl_sys.runtime.session.run`."""
    from jaxrl_sys.runtime.session import run as run_session

    load_agent, registry = _defaults(load_agent, registry)
    return run_session(spec, load_agent, registry, resume=resume, **kwargs)


def sweep(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
          registry: Optional[EnvRegistry] = None, *, resume: Union[str, Path, None] = None):
    """Train every setting of `spec.sweep` x `spec.seeds` as one compiled program and return
    the `SweepOutcome`. See `jaxrl_sys.runtime.sweeps.sweep`."""
    from jaxrl_sys.runtime.sweeps import sweep as run_sweep

    load_agent, registry = _defaults(load_agent, registry)
    return run_sweep(spec, load_agent, registry, resume=resume)


def resolve(spec: RunSpec, load_agent: Optional[Callable[[str], Any]] = None,
            registry: Optional[EnvRegistry] = None, saved_run: Union[str, Path, None] = None):
    """`spec` checked and resolved (agent module, env, config), touching no device."""
    from jaxrl_sys.runtime.run_spec import resolve as resolve_spec

    load_agent, registry = _defaults(load_agent, registry)
    return resolve_spec(spec, load_agent, registry, saved_run=saved_run)
