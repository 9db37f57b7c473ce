"""MuZero's networks: representation, dynamics and prediction in one flax module, and the
small functions that run its parts on observations and latent states.

Values and rewards come out as logits over categorical supports in h-space (`supports`).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.agents.muzero.config import Config
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.networks import MLP, Head, SameConv
from jaxrl_sys.core.types import Discrete, EnvSpec
from jaxrl_sys.core.value_transform import Support, h, logits_to_scalar


def scale_gradient(x: jax.Array, scale: float) -> jax.Array:
    """Identity forward; multiplies the gradient flowing back through `x` by `scale`."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def normalize_latent(latent: jax.Array, planes: bool = False) -> jax.Array:
    """Min-max scale each latent to [0, 1] (the paper's hidden-state scaling): a vector
    [B, D] over its D entries, planes [B, H, W, C] over all their H * W * C entries."""
    axes = (-3, -2, -1) if planes else -1
    low = latent.min(axis=axes, keepdims=True)
    high = latent.max(axis=axes, keepdims=True)
    return (latent - low) / (high - low + 1e-5)


def flatten_rows(x: jax.Array) -> jax.Array:
    """Rows [B, ...] as vectors [B, F] (a vector latent [B, D] is returned as it is)."""
    return x if x.ndim == 2 else x.reshape(x.shape[0], -1)


class ResidualBlock(nn.Module):
    """conv-relu-conv plus the input, then relu (3x3 'SAME' convs whose gradients stay fast
    inside the training loop on CPU; parameter names as nn.Conv's)."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Feature maps [B, H, W, C] to maps of the same shape."""
        y = nn.relu(SameConv(self.channels, name="Conv_0")(x))
        return nn.relu(x + SameConv(self.channels, name="Conv_1")(y))


class ConvTorso(nn.Module):
    """A small residual conv net for image observations [B, H, W, C], flattened unless
    `keep_planes`."""

    channels: int
    blocks: int
    keep_planes: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        """Images [B, H, W, C] to flat features [B, H * W * channels] (or the planes
        [B, H, W, channels])."""
        x = nn.relu(SameConv(self.channels, name="Conv_0")(x))
        for _ in range(self.blocks):
            x = ResidualBlock(self.channels)(x)
        return x if self.keep_planes else x.reshape(x.shape[0], -1)


def with_move_planes(latent: jax.Array, action: jax.Array, num_actions: int) -> jax.Array:
    """Planes [B, H, W, C] with the moves [B] beside them as one-hot planes: [B, H, W, C + A]
    (the input of the plane dynamics)."""
    moves = jax.nn.one_hot(action, num_actions, dtype=latent.dtype)
    moves = jnp.broadcast_to(moves[:, None, None, :], (*latent.shape[:3], num_actions))
    return jnp.concatenate([latent, moves], -1)


RULE_LOGIT_CERTAIN = 30.0  # logit of "legal" / "does not end" when no rule head predicts it
PROJECTION_HIDDEN = 256  # width of the consistency loss's projection and predictor MLPs


class MuZeroNetwork(nn.Module):
    """Representation h(o) -> s, dynamics g(s, a) -> (s', r, end), prediction
    f(s) -> (pi, v, legal).

    Rewards and values come out as logits over their categorical supports. With
    `rule_heads`, `end` is the logit that the move ends the episode and `legal` the logits
    that each move is legal; without, they are constants (never ends, all legal).
    """

    num_actions: int
    latent_dim: int
    hidden: tuple[int, ...]
    activation: str
    conv: bool
    conv_channels: int
    res_blocks: int
    value_bins: int
    reward_bins: int
    rule_heads: bool = False
    consistency: bool = False  # the projection and predictor heads of the consistency loss
    planes: bool = False  # latents keep the board's planes [H, W, conv_channels]
    observation_size: int = 0  # > 0: a decoder from latents to flat observations [F]
    decoder_hidden: tuple[int, ...] = ()  # the decoder's hidden layers; (): one linear map

    def setup(self) -> None:
        """The torso (conv for images, else MLP), three MLPs and their heads; with `planes`
        the conv torso's planes are the latent and the dynamics are convolutional."""
        if self.planes:
            self.torso = ConvTorso(self.conv_channels, self.res_blocks, keep_planes=True)
            # the same conv stack on the planes and the move: features of the next planes
            self.plane_dynamics = ConvTorso(self.conv_channels, self.res_blocks,
                                            keep_planes=True)
        elif self.conv:
            self.torso = ConvTorso(self.conv_channels, self.res_blocks)
        else:
            self.torso = MLP(self.hidden, self.activation)
        if not self.planes:
            self.to_latent = Head(self.latent_dim, np.sqrt(2.0))
            self.next_latent = Head(self.latent_dim, np.sqrt(2.0))
        self.dynamics_mlp = MLP(self.hidden, self.activation)
        self.reward_head = Head(self.reward_bins, 0.01)
        self.prediction_mlp = MLP(self.hidden, self.activation)
        self.policy_head = Head(self.num_actions, 0.01)
        self.value_head = Head(self.value_bins, 0.01)
        if self.rule_heads:
            self.end_head = Head(1, 0.01)
            self.legal_head = Head(self.num_actions, 0.01)
        if self.consistency:
            self.projection_mlp = MLP((PROJECTION_HIDDEN,), self.activation)
            self.projection_out = Head(self.latent_dim, 1.0)
            self.predictor_mlp = MLP((PROJECTION_HIDDEN,), self.activation)
            self.predictor_out = Head(self.latent_dim, 1.0)
        if self.observation_size:
            self.decoder_mlp = MLP(self.decoder_hidden, self.activation)
            self.decoder_out = Head(self.observation_size, 1.0)

    def represent(self, obs: jax.Array) -> jax.Array:
        """Latent states [B, D] (or planes [B, H, W, C]) of observations [B, ...], min-max
        scaled to [0, 1]."""
        if self.planes:
            return normalize_latent(self.torso(obs), planes=True)
        return normalize_latent(self.to_latent(self.torso(obs)))

    def dynamics(self, latent: jax.Array, action: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Next latent [B, D] (or planes [B, H, W, C]), reward logits [B, bins] and end
        logit [B] of latents and actions [B]."""
        if self.planes:
            features = self.plane_dynamics(with_move_planes(latent, action, self.num_actions))
            next_latent = normalize_latent(features, planes=True)
            x = self.dynamics_mlp(flatten_rows(features))
        else:
            x = jnp.concatenate([latent, jax.nn.one_hot(action, self.num_actions)], axis=-1)
            x = self.dynamics_mlp(x)
        end_logit = (self.end_head(x)[:, 0] if self.rule_heads
                     else jnp.full(x.shape[:1], -RULE_LOGIT_CERTAIN))
        if not self.planes:  # traced after the end head, as before plane latents existed
            next_latent = normalize_latent(self.next_latent(x))
        return next_latent, self.reward_head(x), end_logit

    def predict(self, latent: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Policy logits [B, A], value logits [B, bins] and legal-move logits [B, A]."""
        x = self.prediction_mlp(flatten_rows(latent))
        policy_logits = self.policy_head(x)
        legal_logits = (self.legal_head(x) if self.rule_heads
                        else jnp.full_like(policy_logits, RULE_LOGIT_CERTAIN))
        return policy_logits, self.value_head(x), legal_logits

    def project(self, latent: jax.Array) -> jax.Array:
        """The consistency loss's projection [B, D] of latents [B, D] or planes [B, H, W, C]
        (SimSiam's projector)."""
        return self.projection_out(self.projection_mlp(flatten_rows(latent)))

    def predict_projection(self, projection: jax.Array) -> jax.Array:
        """The predictor [B, D] applied to the projections of predicted latents only."""
        return self.predictor_out(self.predictor_mlp(projection))

    def decode(self, latent: jax.Array) -> jax.Array:
        """The flat observations [B, F] that latents [B, D] (or planes [B, H, W, C]) stand
        for (the reconstruction loss's decoder)."""
        return self.decoder_out(self.decoder_mlp(flatten_rows(latent)))

    def __call__(self, obs: jax.Array, action: jax.Array):
        """Touches every sub-network (for `init`)."""
        latent = self.represent(obs)
        next_latent, reward, end = self.dynamics(latent, action)
        outputs = (self.predict(next_latent), reward, end)
        if self.consistency:
            outputs += (self.predict_projection(self.project(next_latent)),)
        if self.observation_size:
            outputs += (self.decode(next_latent),)
        return outputs


def build_network(spec: EnvSpec, config: Config) -> MuZeroNetwork:
    """The network for `spec`'s observations and discrete actions (conv torso for images)."""
    if not isinstance(spec.action_space, Discrete):
        agent = "alphazero" if config.model == "env" else "muzero"
        raise ConfigError(f"{agent} needs discrete actions; {spec.name} has continuous actions")
    conv = config.torso == "conv" or (config.torso == "auto" and len(spec.obs_shape) == 3)
    if conv and len(spec.obs_shape) != 3:
        raise ConfigError(f"torso=conv needs image observations [H, W, C]; {spec.name} "
                          f"has shape {spec.obs_shape}")
    planes = config.plane_latents
    if planes and len(spec.obs_shape) != 3:
        raise ConfigError(f"latent=planes keeps the observation's planes and needs image "
                          f"observations [H, W, C]; {spec.name} has shape {spec.obs_shape}")
    return MuZeroNetwork(
        num_actions=spec.action_space.n, latent_dim=config.latent_dim,
        hidden=tuple(config.hidden), activation=config.activation, conv=conv,
        conv_channels=config.conv_channels, res_blocks=config.res_blocks,
        value_bins=config.support_bins, reward_bins=config.support_bins,
        rule_heads=config.learns_rules, consistency=config.consistency_loss_weight > 0,
        planes=planes,
        observation_size=(int(np.prod(spec.obs_shape))
                          if config.reconstruction_loss_weight > 0 else 0),
        decoder_hidden=tuple(config.hidden if config.decoder_hidden is None
                             else config.decoder_hidden),
    )


def supports(config: Config) -> tuple[Support, Support]:
    """(value, reward) supports in h-space covering +-value_max and +-reward_max."""
    with jax.ensure_compile_time_eval():  # numbers, also when `make` runs inside a trace
        value_edge = float(h(jnp.float32(config.value_max)))
        reward_edge = float(h(jnp.float32(config.reward_max)))
    return (Support(-value_edge, value_edge, config.support_bins),
            Support(-reward_edge, reward_edge, config.support_bins))


def represent_predict(network: MuZeroNetwork, params, obs: jax.Array
                      ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Latent [N, D], policy logits [N, A] and value logits [N, bins] of observations [N, ...]."""
    latent = network.apply(params, obs, method=MuZeroNetwork.represent)
    policy_logits, value_logits, _ = network.apply(params, latent,
                                                   method=MuZeroNetwork.predict)
    return latent, policy_logits, value_logits


def predict_scalar(network: MuZeroNetwork, value_support: Support, params, latent: jax.Array
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Prior logits [N, A], scalar value [N] and legal-move logits [N, A] of latents [N, D]."""
    policy_logits, value_logits, legal_logits = network.apply(
        params, latent, method=MuZeroNetwork.predict)
    return policy_logits, logits_to_scalar(value_logits, value_support), legal_logits


def observation_values(network: MuZeroNetwork, value_support: Support, params, obs: jax.Array
                       ) -> jax.Array:
    """Scalar values [N] of observations [N, ...] (representation, then prediction)."""
    _, _, value_logits = represent_predict(network, params, obs)
    return logits_to_scalar(value_logits, value_support)
