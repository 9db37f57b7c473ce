"""DQN's Q-network: a torso from `core.networks` and a Q head, plain or dueling, giving one
value per action or a distribution per action (C51's logits on fixed atoms, QR-DQN's
quantiles)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import Head, check_torso_fits, make_torso
from jaxrl_sys.core.types import Discrete, EnvSpec


class QNetwork(nn.Module):
    """Q-values [B, A] of observations [B, ...]: an MLP or conv torso (see `networks.TORSOS`),
    then one linear head, or a dueling (value + advantage) head. With a distributional head
    (`distributional` "c51" or "qr"), `distribution` gives [B, A, N] and the Q-values are its
    means: over the softmax on `support` [N] for C51, over the quantiles for QR."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str
    dueling: bool
    torso: str = "mlp"
    distributional: str = "none"
    num_atoms: int = 1
    support: tuple[float, ...] = ()  # C51's atoms

    @nn.compact
    def distribution(self, obs: jax.Array) -> jax.Array:
        """[B, A] Q-values (no distributional head) or [B, A, N] logits or quantiles."""
        x = make_torso(self.torso, self.hidden, self.activation)(obs)
        atoms = () if self.distributional == "none" else (self.num_atoms,)
        lead = x.shape[:-1]
        if not self.dueling:
            return Head(self.num_actions * self.num_atoms)(x).reshape(*lead, self.num_actions,
                                                                      *atoms)
        value = Head(self.num_atoms)(x).reshape(*lead, 1, *atoms)
        advantage = Head(self.num_actions * self.num_atoms)(x).reshape(*lead, self.num_actions,
                                                                       *atoms)
        action_axis = len(lead)
        return value + advantage - advantage.mean(axis=action_axis, keepdims=True)

    def __call__(self, obs: jax.Array) -> jax.Array:
        return q_values(self.distribution(obs), self.distributional, self.support)


def q_values(output: jax.Array, distributional: str, support: tuple[float, ...]) -> jax.Array:
    """Q-values [B, A] from a Q-network's output: itself, or the mean of each action's C51
    distribution (logits [B, A, N] on `support` [N]) or quantiles [B, A, N]."""
    if distributional == "c51":
        return jnp.sum(jax.nn.softmax(output, axis=-1) * jnp.asarray(support), axis=-1)
    if distributional == "qr":
        return jnp.mean(output, axis=-1)
    return output


def build_network(spec: EnvSpec, config: Config) -> QNetwork:
    """The Q-network `config` asks for on `spec`'s observations and actions;
    ConfigError for continuous actions or a conv torso on observations it cannot take."""
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"dqn needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    atoms = 1 if config.distributional == "none" else config.num_atoms
    return QNetwork(spec.action_space.n, tuple(config.hidden), config.activation, config.dueling,
                    config.torso, config.distributional, atoms, config.support)
