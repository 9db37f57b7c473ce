"""DQN's Q-network: a torso from `core.networks` and a Q head, plain or dueling."""

from __future__ import annotations

import flax.linen as nn
import jax

from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import Head, check_torso_fits, make_torso
from jaxrl_sys.core.types import Discrete, EnvSpec


class QNetwork(nn.Module):
    """Q-values [B, A] of observations [B, ...]: an MLP or conv torso (see `networks.TORSOS`),
    then one linear head, or a dueling (value + advantage) head."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str
    dueling: bool
    torso: str = "mlp"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = make_torso(self.torso, self.hidden, self.activation)(obs)
        if not self.dueling:
            return Head(self.num_actions)(x)
        value = Head(1)(x)
        advantage = Head(self.num_actions)(x)
        return value + advantage - advantage.mean(axis=-1, keepdims=True)


def build_network(spec: EnvSpec, config: Config) -> QNetwork:
    """The Q-network `config` asks for on `spec`'s observations and actions;
    ConfigError for continuous actions or a conv torso on observations it cannot take."""
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"dqn needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    return QNetwork(spec.action_space.n, tuple(config.hidden), config.activation, config.dueling,
                    config.torso)
