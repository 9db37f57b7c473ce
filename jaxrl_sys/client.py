"""`PolicyClient` with this package's agents and envs, so that local inference can rebuild
the served policy: `from jaxrl_sys.client import PolicyClient` (see `jaxrl_sys.serve.client`)."""

from __future__ import annotations

from typing import Any

from jaxrl_sys import agents, envs
from jaxrl_sys.serve import client
from jaxrl_sys.serve.client import ServerError

__all__ = ["PolicyClient", "ServerError"]


class PolicyClient(client.PolicyClient):
    """`jaxrl_sys.serve.client.PolicyClient` whose local inference uses this package's agents
    and envs."""

    def __init__(self, address: str, **options: Any):
        options.setdefault("catalog", (agents.load, envs))
        super().__init__(address, **options)
