"""PQN's Q-network: dense layers each followed by LayerNorm (what lets PQN learn without a
target network, Gallici et al. 2024), optionally after a 3x3 conv for grids, and a Q head."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import ACTIVATIONS, Head, SameConv, check_torso_fits, orthogonal
from jaxrl_sys.core.types import Discrete, EnvSpec


class NormedQNetwork(nn.Module):
    """Q-values [B, A] of observations [B, ...]: (grid_cnn: a 3x3 'SAME' conv of 16 channels
    and relu), flattened, then per width in `hidden` Dense -> LayerNorm -> activation, and a
    linear head."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str = "relu"
    layer_norm: bool = True
    torso: str = "mlp"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = obs.astype(jnp.float32)
        if self.torso == "grid_cnn":
            x = nn.relu(SameConv(16)(x))
        x = x.reshape(x.shape[0], -1)
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = nn.Dense(width, kernel_init=orthogonal(np.sqrt(2.0)))(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return Head(self.num_actions)(x)


def build_network(spec: EnvSpec, config) -> NormedQNetwork:
    """The Q-network `config` asks for on `spec`; ConfigError for continuous actions or a conv
    torso on observations it cannot take."""
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"pqn needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    return NormedQNetwork(spec.action_space.n, tuple(config.hidden), config.activation,
                          config.layer_norm, config.torso)
