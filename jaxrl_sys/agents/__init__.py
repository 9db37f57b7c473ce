"""Agents, one module per algorithm; `load(name)` imports one by its command-line name."""

from __future__ import annotations

import difflib
import importlib
from types import ModuleType

AGENTS: dict[str, str] = {
    "ppo": "jaxrl_sys.agents.ppo", "dqn": "jaxrl_sys.agents.dqn", "sac": "jaxrl_sys.agents.sac",
    "muzero": "jaxrl_sys.agents.muzero",
}


class UnknownAgentError(ValueError):
    """An agent name that is not in AGENTS."""


USER_ERRORS = (UnknownAgentError,)  # bad input: one line and exit code 2 in the scripts


def load(name: str) -> ModuleType:
    """The agent module for `name` (e.g. "ppo")."""
    if name not in AGENTS:
        close = difflib.get_close_matches(name, AGENTS, n=3)
        hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(sorted(AGENTS))}"
        raise UnknownAgentError(f"unknown agent {name!r}; {hint}")
    return importlib.import_module(AGENTS[name])
