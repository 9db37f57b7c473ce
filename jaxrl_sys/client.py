"""`PolicyClient` with this package's agents and envs, so that local inference can rebuild
the served policy: `from jaxrl_sys.client import PolicyClient` (see `jaxrl_sys.serve.client`).
A remote-inference client imports neither JAX nor the agents."""

from __future__ import annotations

from typing import Any

from jaxrl_sys.serve import client
from jaxrl_sys.serve.client import ServerError

__all__ = ["PolicyClient", "ServerError"]


def this_packages_catalog() -> tuple[Any, Any]:
    """(agents.load, envs): what local inference rebuilds the served policy with."""
    from jaxrl_sys import agents, envs  # local inference only: JAX and every agent

    return agents.load, envs


class PolicyClient(client.PolicyClient):
    """`jaxrl_sys.serve.client.PolicyClient` whose local inference uses this package's agents
    and envs."""

    def __init__(self, address: str, **options: Any):
        options.setdefault("catalog", this_packages_catalog)
        super().__init__(address, **options)
