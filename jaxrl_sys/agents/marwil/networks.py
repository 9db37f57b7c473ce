"""MARWIL's networks: the offline family's policy (logits, or a Gaussian with a
state-independent log standard deviation) and value network, separate MLPs
(`families.offline_networks`)."""

from jaxrl_sys.agents.families.offline_networks import (  # noqa: F401  (MARWIL's networks)
    PolicyNetwork, ValueNetwork, build_networks,
)

__all__ = ["PolicyNetwork", "ValueNetwork", "build_networks"]
