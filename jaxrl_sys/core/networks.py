"""Small Flax networks shared by the agents."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.types import PyTree

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


def orthogonal(scale: float = 1.0) -> nn.initializers.Initializer:
    """Orthogonal initialiser with gain `scale`, built from matmuls only.

    Gram-Schmidt (with one re-orthogonalisation pass) of a Gaussian matrix instead of
    flax's QR: jaxlib's batched LAPACK QR, which a vmap over seeds produces, blocks XLA:CPU
    pool threads waiting for sub-tasks and deadlocks with two or more devices on two cores.
    Matmuls also compile faster. The result is Haar-distributed like a sign-corrected QR.

    Args:
        scale: the gain.

    Returns:
        `init(key, shape, dtype=float32)`: an array of `shape` whose axes but the last, flattened
            into rows, and the last axis form an orthogonal matrix times `scale`.
    """

    def init(key: jax.Array, shape: Sequence[int], dtype=jnp.float32) -> jax.Array:
        rows, cols = int(np.prod(shape[:-1])), int(shape[-1])
        long, short = max(rows, cols), min(rows, cols)
        gaussian = jax.random.normal(key, (short, long), jnp.float32)

        def add_column(basis: jax.Array, j: jax.Array) -> tuple[jax.Array, None]:
            v = gaussian[j]
            for _ in range(2):  # classical Gram-Schmidt twice is as stable as modified GS
                v = v - basis.T @ (basis @ v)
            return basis.at[j].set(v / jnp.linalg.norm(v)), None

        basis, _ = jax.lax.scan(add_column, jnp.zeros((short, long), jnp.float32), jnp.arange(short))
        matrix = basis if rows < cols else basis.T  # [rows, cols] with orthonormal short side
        return (scale * matrix).reshape(shape).astype(dtype)

    return init


class MLP(nn.Module):
    """Fully connected torso; flattens everything after the batch dimension."""

    hidden: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.reshape(x.shape[0], -1)
        act = ACTIVATIONS[self.activation]
        for width in self.hidden:
            x = act(nn.Dense(width, kernel_init=orthogonal(np.sqrt(2.0)))(x))
        return x


class NatureCNN(nn.Module):
    """The Nature-DQN conv torso (Mnih et al., 2015) for stacked frames [B, C, H, W] (uint8
    Atari stacks [B, 4, 84, 84]): scaled to [0, 1] on device, three convs and a 512 layer."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = jnp.transpose(x.astype(jnp.float32) / 255.0, (0, 2, 3, 1))  # channels last
        init = orthogonal(np.sqrt(2.0))
        for features, size, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(nn.Conv(features, (size, size), (stride, stride), padding="VALID",
                                kernel_init=init)(x))
        x = x.reshape(x.shape[0], -1)
        return nn.relu(nn.Dense(512, kernel_init=init)(x))


_NHWC = ("NHWC", "HWIO", "NHWC")


def _conv(x: jax.Array, kernel: jax.Array, padding) -> jax.Array:
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), padding, dimension_numbers=_NHWC)


@jax.custom_vjp
def same_conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """Stride-1 'SAME' convolution, x [N, H, W, C] and kernel [kh, kw, C, O] (odd sizes).

    Its gradients are written as convolutions in the same canonical layout, with explicit
    transposes: autodiff's own gradient convolutions run 5-11x slower on XLA:CPU inside a
    loop body (a `scan` of updates, an on-device training loop) than outside one; these do
    not (see docs/design/xla-cpu.md). The values are the same.

    Args:
        x: [N, H, W, C] inputs.
        kernel: [kh, kw, C, O] kernel, kh and kw odd.

    Returns:
        [N, H, W, O] outputs.
    """
    return _conv(x, kernel, "SAME")


def _same_conv_fwd(x, kernel):
    return same_conv(x, kernel), (x, kernel)


def _same_conv_bwd(saved, grad_out):
    x, kernel = saved
    kh, kw = kernel.shape[:2]
    # d/dx: the output gradient convolved with the flipped kernel, in and out swapped
    grad_x = _conv(grad_out, jnp.transpose(jnp.flip(kernel, (0, 1)), (0, 1, 3, 2)), "SAME")
    # d/dkernel: the input's channels as the batch, the output gradient as the kernel
    pad = ((kh // 2, kh // 2), (kw // 2, kw // 2))
    grad_k = _conv(jnp.transpose(x, (3, 1, 2, 0)), jnp.transpose(grad_out, (1, 2, 0, 3)), pad)
    return grad_x, jnp.transpose(grad_k, (1, 2, 0, 3))


same_conv.defvjp(_same_conv_fwd, _same_conv_bwd)


class SameConv(nn.Module):
    """`nn.Conv(features, kernel_size)` with stride 1 and 'SAME' padding (flax's default
    initialisers) through `same_conv`, whose gradients stay fast inside loops on CPU."""

    features: int
    kernel_size: tuple[int, int] = (3, 3)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kh, kw = self.kernel_size
        if kh % 2 == 0 or kw % 2 == 0:
            raise ValueError(f"SameConv needs odd kernel sizes, got {self.kernel_size}")
        kernel = self.param("kernel", nn.initializers.lecun_normal(),
                            (kh, kw, x.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros, (self.features,))
        return same_conv(x, kernel.astype(x.dtype)) + bias


class GridCNN(nn.Module):
    """The MinAtar paper's torso (Young & Tian, 2019) for small channels-last grids
    [B, H, W, C] (MinAtar's 10x10xC): one 3x3 'SAME' conv of 16 channels, then `hidden` layers.
    The conv sees which objects are next to which, which a flattened MLP must learn per cell."""

    hidden: Sequence[int]
    activation: str = "relu"
    channels: int = 16

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(SameConv(self.channels)(x.astype(jnp.float32)))
        return MLP(self.hidden, self.activation)(x)


# Observation torsos an agent config may name: "mlp" (its `hidden` widths), "nature_cnn"
# (stacked Atari frames) or "grid_cnn" (small grids such as MinAtar's, then `hidden`)
TORSOS = ("mlp", "nature_cnn", "grid_cnn")


def check_torso_fits(torso: str, obs_shape: Sequence[int], env_name: str) -> None:
    """Refuse a conv torso for observations that are not images (one line, not a traceback).

    Args:
        torso: one of `TORSOS`.
        obs_shape: one observation's shape; a conv torso needs three axes.
        env_name: the env, named in the error.
    """
    if torso != "mlp" and len(obs_shape) != 3:
        layout = "[C, H, W] stacked frames" if torso == "nature_cnn" else "[H, W, C] grids"
        raise ConfigError(f"torso={torso} needs image observations ({layout}); {env_name} "
                          f"observations have shape {tuple(obs_shape)}")


def make_torso(torso: str, hidden: Sequence[int], activation: str) -> nn.Module:
    """The observation torso a config names (one of `TORSOS`).

    Args:
        torso: one of `TORSOS`.
        hidden: layer widths of the MLP (after the conv for "grid_cnn"; "nature_cnn" has its own).
        activation: a name in `ACTIVATIONS` ("nature_cnn" uses relu).

    Returns:
        The module: observations [B, ...] -> features [B, F].
    """
    if torso == "nature_cnn":
        return NatureCNN()
    if torso == "grid_cnn":
        return GridCNN(tuple(hidden), activation)
    return MLP(tuple(hidden), activation)


def scan_unroll(torso: str, length: int) -> int:
    """The `unroll` for a `lax.scan` of `length` gradient steps through `torso`: all of it for
    a conv torso on CPU, where XLA runs a convolution inside a loop body about 8x slower than
    outside one (measured: 4 Nature-torso gradients of 256 frames 14.6 s in a scan, 1.7 s
    unrolled); 1 (a loop) elsewhere, which compiles faster.

    Args:
        torso: one of `TORSOS`.
        length: the scan's length.

    Returns:
        `length` or 1.
    """
    return length if torso == "nature_cnn" and jax.default_backend() == "cpu" else 1


class Head(nn.Module):
    """A linear output layer with a chosen orthogonal gain."""

    features: int
    scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.Dense(
            self.features, kernel_init=orthogonal(self.scale), bias_init=nn.initializers.zeros
        )(x)


class NoisyDense(nn.Module):
    """A linear layer with factorised Gaussian noise on its weights and biases (Fortunato et
    al. 2018), for exploration by noise: `mu + sigma * f(eps_out) f(eps_in)^T`, with
    f(x) = sign(x) sqrt(|x|) and one draw of eps per call from the "noise" RNG stream. Without
    that stream (greedy acting, evaluation) it is the mean layer `mu`.

    The noisy part is computed as `f(eps_out) * ((x * f(eps_in)) @ sigma)`, never forming the
    [in, out] noise matrix, so a call vmapped over rows (one key each) costs two products."""

    features: int
    sigma_zero: float = 0.5  # the paper's sigma_0 for factorised noise

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        fan_in = x.shape[-1]
        bound = 1.0 / np.sqrt(fan_in)
        uniform = lambda key, shape: jax.random.uniform(key, shape, jnp.float32, -bound, bound)
        sigma = lambda key, shape: jnp.full(shape, self.sigma_zero * bound, jnp.float32)
        mu_w = self.param("mu_kernel", uniform, (fan_in, self.features))
        mu_b = self.param("mu_bias", uniform, (self.features,))
        sigma_w = self.param("sigma_kernel", sigma, (fan_in, self.features))
        sigma_b = self.param("sigma_bias", sigma, (self.features,))
        y = x @ mu_w + mu_b
        if not self.has_rng("noise"):
            return y
        in_key, out_key = jax.random.split(self.make_rng("noise"))
        scaled = lambda e: jnp.sign(e) * jnp.sqrt(jnp.abs(e))
        eps_in = scaled(jax.random.normal(in_key, (fan_in,)))
        eps_out = scaled(jax.random.normal(out_key, (self.features,)))
        return y + eps_out * ((x * eps_in) @ sigma_w + sigma_b)


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs, or (a conv torso) one torso shared by both.

    Discrete: returns (logits, value). Continuous: returns ((mean, log_std), value) with a
    state-independent log standard deviation, as is standard for PPO.
    """

    action_dim: int
    discrete: bool
    hidden: Sequence[int] = (64, 64)
    activation: str = "tanh"
    torso: str = "mlp"

    def setup(self) -> None:
        if self.torso != "mlp":
            self.shared_torso = make_torso(self.torso, self.hidden, self.activation)
        else:
            self.actor_torso = MLP(self.hidden, self.activation)
            self.critic_torso = MLP(self.hidden, self.activation)
        self.actor_head = Head(self.action_dim, scale=0.01)
        self.critic_head = Head(1, scale=1.0)
        if not self.discrete:
            self.log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))

    def value(self, obs: jax.Array) -> jax.Array:
        """State value V(obs), shape [batch].

        Args:
            obs: [B, ...] observations.

        Returns:
            [B] values.
        """
        torso = self.shared_torso if self.torso != "mlp" else self.critic_torso
        return self._value_head(torso(obs))

    def policy(self, obs: jax.Array):
        """Policy parameters: logits, or (mean, log_std) broadcast to the batch.

        Args:
            obs: [B, ...] observations.

        Returns:
            Logits [B, action_dim] (discrete), or the pair (mean, log_std), each [B, action_dim].
        """
        torso = self.shared_torso if self.torso != "mlp" else self.actor_torso
        return self._policy_head(torso(obs))

    def __call__(self, obs: jax.Array):
        if self.torso != "mlp":  # the torso once for both heads
            features = self.shared_torso(obs)
            return self._policy_head(features), self._value_head(features)
        return self.policy(obs), self.value(obs)

    def _value_head(self, features: jax.Array) -> jax.Array:
        return self.critic_head(features)[:, 0]

    def _policy_head(self, features: jax.Array):
        out = self.actor_head(features)
        if self.discrete:
            return out
        return out, jnp.broadcast_to(self.log_std, out.shape)


# Recurrent cores an agent config may name as its `memory`: "none" (feed-forward), or a GRU or
# LSTM cell (flax's) between the observation torso and the heads
MEMORIES = ("none", "gru", "lstm")


def initial_memory(memory: str, size: int, batch: int) -> PyTree:
    """The state [B, size] (an LSTM's: the pair (c, h)) that every episode starts from: zeros,
    as flax's cells' `initialize_carry` gives; None for `memory="none"`.

    Args:
        memory: "none", "gru" or "lstm".
        size: the units H.
        batch: the batch size B.

    Returns:
        Zeros [B, H] (GRU), a pair (c, h) of them (LSTM), or None.
    """
    if memory == "none":
        return None
    zeros = jnp.zeros((batch, size), jnp.float32)
    return (zeros, zeros) if memory == "lstm" else zeros


def reset_memory(memory: PyTree, starts: jax.Array) -> PyTree:
    """`memory` [B, ...] with the rows whose `starts` [B] is True set to the initial (zero)
    state: the step that begins an episode never sees the previous episode's state.

    Args:
        memory: leaves [B, ...] (any pytree, e.g. an LSTM's (c, h)).
        starts: bool [B].

    Returns:
        `memory`'s structure and shapes, zeros in the rows that start.
    """
    return jax.tree.map(
        lambda m: jnp.where(starts.reshape(-1, *(1,) * (m.ndim - 1)), jnp.zeros_like(m), m),
        memory)


def gate_blocks(gates: int) -> nn.initializers.Initializer:
    """An initialiser of [in, gates * H] kernels: one orthogonal [in, H] block per gate, as the
    separate per-gate kernels of flax's cells are initialised.

    Args:
        gates: the number of gates.

    Returns:
        `init(key, shape, dtype=float32)` of kernels [in, gates * H] (the last axis divisible by
            `gates`).
    """

    def init(key: jax.Array, shape: Sequence[int], dtype=jnp.float32) -> jax.Array:
        width = shape[-1] // gates
        keys = jax.random.split(key, gates)
        return jnp.concatenate([orthogonal(1.0)(k, (*shape[:-1], width), dtype) for k in keys],
                               axis=-1)

    return init


def _gru_step(h: jax.Array, x: jax.Array, recurrent: jax.Array, bias: jax.Array) -> jax.Array:
    """flax `GRUCell`'s update of h [B, H] given the projected input x [B, 3H] (r, z, n blocks,
    input biases included) and the recurrent kernel [H, 3H] with the n gate's bias [H]."""
    size = h.shape[-1]
    hidden = h @ recurrent
    r = nn.sigmoid(x[:, :size] + hidden[:, :size])
    z = nn.sigmoid(x[:, size:2 * size] + hidden[:, size:2 * size])
    n = jnp.tanh(x[:, 2 * size:] + r * (hidden[:, 2 * size:] + bias))
    return (1.0 - z) * n + z * h


def _lstm_step(carry: tuple[jax.Array, jax.Array], x: jax.Array,
               recurrent: jax.Array) -> tuple[jax.Array, jax.Array]:
    """flax `OptimizedLSTMCell`'s update of (c, h) [B, H] given the projected input x [B, 4H]
    (i, f, g, o blocks, biases included) and the recurrent kernel [H, 4H]."""
    c, h = carry
    size = h.shape[-1]
    gates = x + h @ recurrent
    i, f = nn.sigmoid(gates[:, :size]), nn.sigmoid(gates[:, size:2 * size])
    g, o = jnp.tanh(gates[:, 2 * size:3 * size]), nn.sigmoid(gates[:, 3 * size:])
    c = f * c + i * g
    return c, o * jnp.tanh(c)


class SequenceMemory(nn.Module):
    """A GRU or LSTM (flax's cell equations) run over time: (carry [B, ...], (features
    [T, B, F], starts bool [T, B])) -> (carry after the last step, (carries after each step
    [T, B, ...], outputs [T, B, size])). The carry is reset to zeros before every step whose
    `starts` is True (truncated back-propagation stops there).

    The input projection of all T steps is one matmul before the loop, which leaves one
    [B, H] x [H, gates * H] matmul per step: a step of flax's cells does one per gate and
    input, and in a scan of small batches those dominate (1.4x faster PPO updates measured).
    """

    memory: str
    size: int

    @nn.compact
    def __call__(self, carry: PyTree, inputs: tuple[jax.Array, jax.Array]):
        features, starts = inputs
        gates = 4 if self.memory == "lstm" else 3
        projected = nn.Dense(gates * self.size, kernel_init=gate_blocks(gates),
                             name="input")(features)  # [T, B, gates * H]
        recurrent = self.param("recurrent_kernel", gate_blocks(gates),
                               (self.size, gates * self.size))
        if self.memory == "lstm":
            step = functools.partial(_lstm_step, recurrent=recurrent)
        else:
            bias = self.param("recurrent_bias", nn.initializers.zeros, (self.size,))
            step = functools.partial(_gru_step, recurrent=recurrent, bias=bias)

        def body(carry, inputs):
            """One step from the carry, reset first where an episode starts."""
            x, start = inputs
            carry = step(reset_memory(carry, start), x)
            output = carry[1] if self.memory == "lstm" else carry
            return carry, (carry, output)

        return jax.lax.scan(body, carry, (projected, starts))


class RecurrentActorCritic(nn.Module):
    """Observation torso, then a GRU or LSTM `memory` of `memory_size` units shared by an actor
    and a critic head (one `hidden[-1]`-wide layer each), over time-major sequences.

    `__call__(memory, obs [T, B, ...], starts [T, B])` -> (memory after the last step,
    (policy outputs [T, B, ...], values [T, B])): logits, or (mean, log_std) for a Box, as
    `ActorCritic` gives. `starts[t]` marks an observation that begins an episode: the state is
    reset before it, so no output depends on an earlier episode. A copy with
    `per_step_carries=True` (`network.clone(...)`, the same parameters) returns the state after
    every step as a third output, from which each step's next observation can be valued.
    """

    action_dim: int
    discrete: bool
    hidden: Sequence[int] = (128,)
    activation: str = "relu"
    torso: str = "mlp"
    memory: str = "gru"
    memory_size: int = 128
    per_step_carries: bool = False  # also return the state after every step [T, B, ...]

    @nn.compact
    def __call__(self, memory: PyTree, obs: jax.Array, starts: jax.Array):
        steps, batch = obs.shape[:2]
        features = make_torso(self.torso, self.hidden, self.activation)(
            obs.reshape(steps * batch, *obs.shape[2:]))
        memory, (carries, outputs) = SequenceMemory(self.memory, self.memory_size)(
            memory, (features.reshape(steps, batch, -1), starts))
        flat = outputs.reshape(steps * batch, -1)
        width = (self.hidden[-1],)
        logits = Head(self.action_dim, scale=0.01)(MLP(width, self.activation)(flat))
        values = Head(1, scale=1.0)(MLP(width, self.activation)(flat))[:, 0]
        unflat = lambda x: x.reshape(steps, batch, *x.shape[1:])  # noqa: E731
        if self.discrete:
            policy = unflat(logits)
        else:
            log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
            policy = (unflat(logits), jnp.broadcast_to(log_std, unflat(logits).shape))
        if self.per_step_carries:
            return memory, (policy, unflat(values)), carries
        return memory, (policy, unflat(values))
