"""DQN's Q-network: a torso from `core.networks` and a Q head, plain or dueling, linear or
noisy, giving one value per action or a distribution per action (C51's logits on fixed atoms,
QR-DQN's quantiles, or IQN's quantiles at given fractions)."""

from __future__ import annotations

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.agents.dqn.losses import Draw, quantile_fractions
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import Head, NoisyDense, check_torso_fits, make_torso
from jaxrl_sys.core.types import Discrete, EnvSpec


class CosineEmbedding(nn.Module):
    """IQN's embedding of quantile fractions [..., N] into [..., N, features]:
    relu(Dense(cos(pi * i * tau) for i < num_cosines)) (Dabney et al. 2018)."""

    features: int
    num_cosines: int = 64

    @nn.compact
    def __call__(self, taus: jax.Array) -> jax.Array:
        frequencies = jnp.pi * jnp.arange(self.num_cosines, dtype=jnp.float32)
        return nn.relu(nn.Dense(self.features)(jnp.cos(taus[..., None] * frequencies)))


class QNetwork(nn.Module):
    """Q-values [B, A] of observations [B, ...]: an MLP or conv torso (see `networks.TORSOS`),
    then one head, or a dueling (value + advantage) head, linear or noisy (`NoisyDense`, whose
    noise is drawn when the "noise" RNG stream is given). With a distributional head
    (`distributional` "c51", "qr" or "iqn"), `distribution` gives [B, A, N] and the Q-values
    are its means: over the softmax on `support` [N] for C51, over the quantiles for QR and
    IQN (at N fixed midpoint fractions, unless fractions are given)."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str
    dueling: bool
    torso: str = "mlp"
    distributional: str = "none"
    num_atoms: int = 1
    support: tuple[float, ...] = ()  # C51's atoms
    noisy: bool = False
    num_cosines: int = 64  # IQN's embedding size

    @nn.compact
    def distribution(self, obs: jax.Array, taus: Optional[jax.Array] = None) -> jax.Array:
        """[B, A] Q-values (no distributional head) or [B, A, N] logits or quantiles; IQN's
        quantiles are at `taus` [B, N] (default: N midpoints)."""
        x = make_torso(self.torso, self.hidden, self.activation)(obs)
        if self.distributional == "iqn":
            if taus is None:
                taus = jnp.broadcast_to(quantile_fractions(self.num_atoms),
                                        (*x.shape[:-1], self.num_atoms))
            x = x[..., None, :] * CosineEmbedding(x.shape[-1], self.num_cosines)(taus)
            return jnp.swapaxes(self._q_head(x, ()), -1, -2)  # [B, N, A] -> [B, A, N]
        atoms = () if self.distributional == "none" else (self.num_atoms,)
        return self._q_head(x, atoms)

    def _q_head(self, x: jax.Array, atoms: tuple[int, ...]) -> jax.Array:
        """Features [*lead, F] to [*lead, A, *atoms]: one head, or dueling's value and
        advantage heads with the advantage's mean over actions taken out."""
        layer = NoisyDense if self.noisy else Head
        lead = x.shape[:-1]
        size = 1 if not atoms else atoms[0]
        if not self.dueling:
            return layer(self.num_actions * size)(x).reshape(*lead, self.num_actions, *atoms)
        value = layer(size)(x).reshape(*lead, 1, *atoms)
        advantage = layer(self.num_actions * size)(x).reshape(*lead, self.num_actions, *atoms)
        return value + advantage - advantage.mean(axis=len(lead), keepdims=True)

    def __call__(self, obs: jax.Array) -> jax.Array:
        return q_values(self.distribution(obs), self.distributional, self.support)


def q_values(output: jax.Array, distributional: str, support: tuple[float, ...]) -> jax.Array:
    """Q-values [B, A] from a Q-network's output: itself, or the mean of each action's C51
    distribution (logits [B, A, N] on `support` [N]) or quantiles [B, A, N] (QR, IQN)."""
    if distributional == "c51":
        return jnp.sum(jax.nn.softmax(output, axis=-1) * jnp.asarray(support), axis=-1)
    if distributional in ("qr", "iqn"):
        return jnp.mean(output, axis=-1)
    return output


def sampled_distribution(network: QNetwork, params: Any, obs: jax.Array,
                         draw: Optional[Draw], num_taus: int
                         ) -> tuple[jax.Array, Optional[jax.Array]]:
    """The network's output at observations [B, ...] under `draw`: the noisy layers' noise
    and IQN's `num_taus` fractions per row (uniform in (0, 1)). With `draw` None: the mean
    layers, IQN at `num_taus` midpoints.

    Args:
        network: the Q-network.
        params: its parameters.
        obs: [B, ...] observations.
        draw: the pass's randomness, or None.
        num_taus: IQN's number of fractions (unused by the other heads).

    Returns:
        output: [B, A] Q-values or [B, A, N] distributions.
        taus: [B, N] IQN's fractions, else None.
    """
    taus = None
    if network.distributional == "iqn":
        taus = (jnp.broadcast_to(quantile_fractions(num_taus), (obs.shape[0], num_taus))
                if draw is None else
                jax.vmap(lambda k: jax.random.uniform(k, (num_taus,)))(draw.rows))
    rngs = {"noise": draw.key} if draw is not None and network.noisy else None
    return network.apply(params, obs, taus, method=QNetwork.distribution, rngs=rngs), taus


def noisy_q_values(network: QNetwork, params: Any, obs: jax.Array,
                   keys: jax.Array) -> jax.Array:
    """Q-values [B, A] at observations [B, ...], each row under its own noise drawn from its
    key in `keys` [B] (acting: every env explores by its own noise; IQN at midpoints)."""
    def one_row(row_obs: jax.Array, key: jax.Array) -> jax.Array:
        output = network.apply(params, row_obs[None], method=QNetwork.distribution,
                               rngs={"noise": key})
        return q_values(output, network.distributional, network.support)[0]

    return jax.vmap(one_row)(obs, keys)


def build_network(spec: EnvSpec, config: Config) -> QNetwork:
    """The Q-network `config` asks for on `spec`'s observations and actions;
    ConfigError for continuous actions or a conv torso on observations it cannot take."""
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"dqn needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    atoms = 1 if config.distributional == "none" else config.num_atoms
    return QNetwork(spec.action_space.n, tuple(config.hidden), config.activation, config.dueling,
                    config.torso, config.distributional, atoms, config.support, config.noisy,
                    config.num_cosines)
