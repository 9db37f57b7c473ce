"""What the team agents (MAPPO and IPPO, QMIX and VDN) share, written once: the agents' one-hot
ids that let one set of parameters serve every agent, and the check that an env is a team."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.types import EnvSpec


def with_agent_ids(x: jax.Array) -> jax.Array:
    """Inputs [..., N, D] with each agent's one-hot id appended: [..., N, D + N].

    Args:
        x: [..., N, D] inputs of N agents.

    Returns:
        [..., N, D + N] inputs, `x`'s dtype.
    """
    agents = x.shape[-2]
    ids = jnp.broadcast_to(jnp.eye(agents, dtype=x.dtype), (*x.shape[:-2], agents, agents))
    return jnp.concatenate([x, ids], axis=-1)


def check_team(spec: EnvSpec) -> None:
    """One line unless `spec` is a team of agents with discrete actions.

    Args:
        spec: the env's spec.
    """
    if spec.num_agents < 2 or not spec.discrete:
        raise ConfigError(f"{spec.name} is not a multi-agent env with discrete actions "
                          "(jaxmarl:<env>, jaxmarl:SMAX:<map>)")
