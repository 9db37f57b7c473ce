"""CQL's Q-network for discrete actions: the offline family's per-action Q-values (for
continuous actions CQL runs on SAC's actor and critics, continuous.py)."""

from __future__ import annotations

from jaxrl_sys.agents.families.offline_networks import ActionValues
from jaxrl_sys.core.types import EnvSpec

QNetwork = ActionValues  # Q-values [B, A] for observations [B, ...]


def build_network(spec: EnvSpec, config) -> ActionValues:
    """The Q-network for `spec`'s discrete actions (continuous ones: continuous.py)."""
    return ActionValues(spec.action_space.n, tuple(config.hidden), config.activation)
