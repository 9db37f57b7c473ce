"""Categorical value/reward representation of MuZero: the h(x) squashing transform and
two-hot projection onto a fixed support.

Scalars are squashed with h, which shrinks large returns so that one support of modest size
covers them, then spread over the two nearest support points (two-hot) so that the expected
support value of the distribution is exactly h(x). Decoding inverts both steps.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

EPSILON = 1e-3  # the paper's epsilon in h(x): keeps h invertible and Lipschitz at large |x|


def h(x: jax.Array, eps: float = EPSILON) -> jax.Array:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x.

    Args:
        x: raw scalars, any shape.
        eps: the weight of the linear term.

    Returns:
        h(x), `x`'s shape.
    """
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def h_inverse(y: jax.Array, eps: float = EPSILON) -> jax.Array:
    """The exact inverse of `h` (closed form of the quadratic in sqrt(|x| + 1)).

    Args:
        y: squashed scalars, any shape.
        eps: the `eps` that `h` used.

    Returns:
        x with h(x) = y, `y`'s shape.
    """
    root = (jnp.sqrt(1.0 + 4.0 * eps * (jnp.abs(y) + 1.0 + eps)) - 1.0) / (2.0 * eps)
    return jnp.sign(y) * (jnp.square(root) - 1.0)


@dataclasses.dataclass(frozen=True)
class Support:
    """Evenly spaced points `low, low + step, ..., high` of a categorical distribution."""

    low: float
    high: float
    num_bins: int

    def __post_init__(self) -> None:
        if self.num_bins < 2 or not self.high > self.low:
            raise ValueError(f"support needs >= 2 bins and high > low, got {self}")

    @property
    def step(self) -> float:
        """The distance between neighbouring points.

        Returns:
            (high - low) / (num_bins - 1).
        """
        return (self.high - self.low) / (self.num_bins - 1)

    def points(self) -> jax.Array:
        """The points of the support.

        Returns:
            [num_bins] float32 points, `low` to `high`.
        """
        return jnp.linspace(self.low, self.high, self.num_bins, dtype=jnp.float32)


def symmetric_support(half_width: int) -> Support:
    """Integer points -half_width..half_width (in h-space), as in the MuZero paper.

    Args:
        half_width: the largest point.

    Returns:
        A `Support` of 2 * half_width + 1 points.
    """
    return Support(-float(half_width), float(half_width), 2 * half_width + 1)


def two_hot(x: jax.Array, support: Support) -> jax.Array:
    """Probabilities [..., num_bins] on the two points around x (clipped into the support)
    whose mean is x.

    Args:
        x: [...] scalars in the support's space, any shape.
        support: the points.

    Returns:
        [..., num_bins] float32 probabilities.
    """
    x = jnp.clip(x, support.low, support.high)
    position = (x - support.low) / support.step
    lower = jnp.clip(jnp.floor(position), 0, support.num_bins - 2)
    upper_weight = position - lower
    lower_index = lower.astype(jnp.int32)
    bins = jnp.arange(support.num_bins)
    return (
        (bins == lower_index[..., None]) * (1.0 - upper_weight[..., None])
        + (bins == lower_index[..., None] + 1) * upper_weight[..., None]
    ).astype(jnp.float32)


def expectation(probs: jax.Array, support: Support) -> jax.Array:
    """The mean of a distribution [..., num_bins] over the support (inverse of two_hot).

    Args:
        probs: [..., num_bins] probabilities.
        support: the points.

    Returns:
        [...] means.
    """
    return jnp.sum(probs * support.points(), axis=-1)


def scalar_to_probs(x: jax.Array, support: Support) -> jax.Array:
    """Encode raw scalars: two_hot(h(x)).

    Args:
        x: [...] raw scalars, any shape.
        support: the points (in h-space).

    Returns:
        [..., num_bins] float32 probabilities.
    """
    return two_hot(h(x), support)


def logits_to_scalar(logits: jax.Array, support: Support) -> jax.Array:
    """Decode network logits to raw scalars: h^-1(E[softmax(logits)]).

    Args:
        logits: [..., num_bins] logits over the support.
        support: the points (in h-space).

    Returns:
        [...] raw scalars.
    """
    return h_inverse(expectation(jax.nn.softmax(logits, axis=-1), support))
