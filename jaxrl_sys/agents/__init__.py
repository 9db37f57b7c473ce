"""The agent registry: one line per algorithm. `load(name)` imports an agent by its
command-line name and returns it as the agent contract (`jaxrl_sys.core.types.AgentDef`).

CLI help, learning-check cases, benchmark lists and the contract tests all read this table, so
adding an agent is its package (agent.py, losses.py, defaults.py) plus one line here. A variant
of an agent (IPPO of MAPPO) is a module in that agent's package.
"""

from __future__ import annotations

import difflib
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxrl_sys.core.types import AgentDef, LearningPromise

AGENTS: dict[str, str] = {
    "ppo": "jaxrl_sys.agents.ppo",
    "dqn": "jaxrl_sys.agents.dqn",
    "sac": "jaxrl_sys.agents.sac",
    "muzero": "jaxrl_sys.agents.muzero",
    "alphazero": "jaxrl_sys.agents.muzero.alphazero",
    "impala": "jaxrl_sys.agents.impala",
    "r2d2": "jaxrl_sys.agents.r2d2",
    "ippo": "jaxrl_sys.agents.mappo.ippo",
    "mappo": "jaxrl_sys.agents.mappo",
    "qmix": "jaxrl_sys.agents.qmix",
    "vdn": "jaxrl_sys.agents.qmix.vdn",
    "pqn": "jaxrl_sys.agents.pqn",
    "rainbow": "jaxrl_sys.agents.dqn.rainbow",
    "ddpg": "jaxrl_sys.agents.td3.ddpg",
    "td3": "jaxrl_sys.agents.td3",
    "a2c": "jaxrl_sys.agents.ppo.a2c",
    "pg": "jaxrl_sys.agents.ppo.pg",
    "es": "jaxrl_sys.agents.es",
    "ars": "jaxrl_sys.agents.es.ars",
    "maddpg": "jaxrl_sys.agents.maddpg",
    "marwil": "jaxrl_sys.agents.marwil",
    "bc": "jaxrl_sys.agents.marwil.bc",
    "iql": "jaxrl_sys.agents.iql",
    "cql": "jaxrl_sys.agents.cql",
}


class UnknownAgentError(ValueError):
    """An agent name that is not in AGENTS."""


USER_ERRORS = (UnknownAgentError,)  # bad input: one line and exit code 2 in the commands


def package_of(name: str) -> str:
    """The agent package (`jaxrl_sys.agents.<package>`) that agent `name` lives in."""
    return ".".join(AGENTS[name].split(".")[:3])


def names() -> list[str]:
    """The registered agents' command-line names, in registry order."""
    return list(AGENTS)


def load(name: str) -> AgentDef:
    """The agent called `name` (e.g. "ppo"): its package, which keeps the agent contract."""
    if name not in AGENTS:
        close = difflib.get_close_matches(name, AGENTS, n=3)
        hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(AGENTS)}"
        raise UnknownAgentError(f"unknown agent {name!r}; {hint}")
    return importlib.import_module(AGENTS[name])


class Catalog:
    """The registry as the run layer takes it (`jaxrl_sys.runtime.run_spec.AgentCatalog`):
    `catalog(name)` loads an agent, `catalog.names()` lists them, so that a refusal can name
    the agents that fit."""

    def __call__(self, name: str) -> AgentDef:
        return load(name)

    def names(self) -> list[str]:
        return names()


catalog = Catalog()


def promises() -> dict[str, tuple[LearningPromise, ...]]:
    """Every registered agent's learning promises (imports every agent): the learning checks'
    and learning tests' cases."""
    return {name: load(name).PROMISES for name in AGENTS}
