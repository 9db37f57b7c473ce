"""What MuZero's learner trains towards along sampled sequences: which unroll steps are real
or absorbing, n-step value targets bootstrapped by the target network or by the stored
search values, and policy targets searched afresh (reanalyse).

Sequences are [B, L] with L = K + n stored steps (K unroll steps, n steps of the last
target; one more when the last target bootstraps from a stored search value); unroll steps
0..K give arrays [B, K+1].
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.agents.muzero.search import SearchOutput
from jaxrl_sys.core import replay
from jaxrl_sys.core.returns import bootstrap_step, n_step_targets


@struct.dataclass
class Batch(replay.SequenceBatch):
    """Sampled sequences [B, L, ...], validity and IS weights [B], with the search's policy
    and the legal actions at each step [B, L, A] and its root value [B, L]."""

    policy: jax.Array
    legal: jax.Array
    root_value: jax.Array


def unroll_masks(
    terminated: jax.Array, truncated: jax.Array, valid: jax.Array, unroll_steps: int
) -> tuple[jax.Array, jax.Array]:
    """Which unroll steps 0..K of sequences [B, L] are real states and which are absorbing.

    alive[:, k]: the state k steps after the start is in the start's episode (and stored).
    absorbing[:, k]: it lies past that episode's termination, where the model must predict
    value and reward 0. Steps past a truncation or the replay's write head are neither and
    get no loss (the real episode went on, or nothing is known). Returns two bool [B, K+1].
    """
    done = terminated | truncated
    alive = [valid[:, 0]]
    absorbing = [jnp.zeros_like(valid[:, 0])]
    for k in range(1, unroll_steps + 1):
        alive.append(alive[k - 1] & ~done[:, k - 1] & valid[:, k])
        absorbing.append(absorbing[k - 1] | (alive[k - 1] & terminated[:, k - 1]))
    return jnp.stack(alive, 1), jnp.stack(absorbing, 1)


def unroll_value_targets(
    reward: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    valid: jax.Array,
    unroll_steps: int,
    n_step: int,
    discount: float,
) -> jax.Array:
    """n-step value targets [B, K+1] for the states 0..K of sequences [B, K + n].

    Target k sums `discount`-discounted rewards k..k+n-1, stopping at the first episode end
    or unwritten step, and bootstraps from `next_values` (the value of the state reached)
    there unless the episode terminated (see `returns.n_step_targets`). A two-player game
    passes discount -gamma. Only meaningful where `unroll_masks` says alive.
    """
    window = lambda x, k: jax.lax.dynamic_slice_in_dim(x, k, n_step, axis=1)  # noqa: E731

    def target_from(k):
        """Targets [B] of unroll step k, from the window of steps k..k+n-1."""
        return n_step_targets(
            window(reward, k), window(next_values, k), window(terminated, k),
            window(truncated, k), window(valid, k), discount,
        )

    return jax.vmap(target_from, out_axes=1)(jnp.arange(unroll_steps + 1))


def bootstrapped_value_targets(batch: Batch, value_fn: Callable[[jax.Array], jax.Array],
                               unroll_steps: int, n_step: int, discount: float) -> jax.Array:
    """n-step targets [B, K+1] for unroll steps 0..K, bootstrapped by `value_fn`, the target
    network's scalar values [N] of next observations [N, ...].

    Each target reads one next value (at its window's `bootstrap_step`), so the target
    network runs on those K+1 states per row only, not on all K + n.
    """
    K = unroll_steps
    obs_shape = batch.next_obs.shape[2:]
    b, length = batch.reward.shape
    window = lambda x, k: jax.lax.dynamic_slice_in_dim(x, k, n_step, 1)  # noqa: E731
    stops = jax.vmap(
        lambda k: k + bootstrap_step(window(batch.terminated, k), window(batch.truncated, k),
                                     window(batch.valid, k)),
        out_axes=1,
    )(jnp.arange(K + 1))  # [B, K+1]
    index = stops.reshape(b, K + 1, *([1] * len(obs_shape)))
    boot_obs = jnp.take_along_axis(batch.next_obs, index, axis=1)
    values = value_fn(boot_obs.reshape(b * (K + 1), *obs_shape)).reshape(b, K + 1)
    # windows that stop at the same step read the same next state, so one array serves all
    next_values = jnp.zeros((b, length)).at[jnp.arange(b)[:, None], stops].set(values)
    return unroll_value_targets(
        batch.reward, next_values, batch.terminated, batch.truncated, batch.valid,
        K, n_step, discount,
    )


def search_value_targets(
    reward: jax.Array,
    root_value: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    valid: jax.Array,
    unroll_steps: int,
    n_step: int,
    discount: float,
) -> jax.Array:
    """n-step value targets [B, K+1] for the states 0..K of sequences [B, L >= K + n + 1],
    bootstrapped from the root values [B, L] the acting search stored (the paper's
    `make_target`).

    Target k sums `discount`-discounted rewards k..k+n-1 and then the stored value of step
    k+n; it stops at a termination (no bootstrap). Where the next state was never searched
    (a truncation: the env reset; or the replay's write head) the target stops one step
    earlier, at the stored value of the last searched state. Only meaningful where
    `unroll_masks` says alive.
    """
    done = terminated | truncated
    next_valid = jnp.concatenate([valid[:, 1:], jnp.zeros_like(valid[:, :1])], axis=1)
    next_searched = ~done & next_valid  # [B, L]: the next state is stored and searched

    def target_from(k):
        """Targets [B] of unroll step k: a backward pass over steps k+n-1..k."""
        window = lambda x: jax.lax.dynamic_slice_in_dim(x, k, n_step, axis=1).T  # noqa: E731

        def backward(later, x):
            r, value_here, ends, goes_on = x
            target = jnp.where(ends, r, jnp.where(goes_on, r + discount * later, value_here))
            return target, None

        last_next = jax.lax.dynamic_index_in_dim(root_value, k + n_step, axis=1,
                                                 keepdims=False)
        target, _ = jax.lax.scan(
            backward, last_next,
            (window(reward), window(root_value), window(terminated), window(next_searched)),
            reverse=True,
        )
        return target

    return jax.vmap(target_from, out_axes=1)(jnp.arange(unroll_steps + 1))


def mirrored_rows(batch: Batch, mirror_axes: tuple[int, ...]) -> Batch:
    """Sequences [B, L, ...] with every odd row replaced by its mirror image: observations
    reversed along `mirror_axes` (axes of one observation), and the moves [B, L] and the
    per-move policies and legal masks [B, L, A] in reversed move order.

    For a game that its mirror image maps onto itself (`EnvSpec.mirror_axes`) the mirrored row
    is as true a sample as the stored one (rewards, ends and values unchanged), so the learner
    sees both sides of the positions it replays (AlphaGo Zero's symmetry augmentation).
    """
    num_actions = batch.policy.shape[-1]
    obs_axes = tuple(2 + axis for axis in mirror_axes)

    def odd_rows_as(x: jax.Array, mirror: Callable[[jax.Array], jax.Array]) -> jax.Array:
        return x.at[1::2].set(mirror(x[1::2]))

    return batch.replace(
        obs=odd_rows_as(batch.obs, lambda x: jnp.flip(x, obs_axes)),
        next_obs=odd_rows_as(batch.next_obs, lambda x: jnp.flip(x, obs_axes)),
        action=odd_rows_as(batch.action, lambda a: num_actions - 1 - a),
        policy=odd_rows_as(batch.policy, lambda p: jnp.flip(p, -1)),
        legal=odd_rows_as(batch.legal, lambda m: jnp.flip(m, -1)),
    )


def reanalysed_policies(target_params, batch: Batch, key: jax.Array, *,
                        search: Callable[..., SearchOutput], reanalyse_fraction: float,
                        unroll_steps: int) -> jax.Array:
    """Policy targets [B, L, A]: steps 0..K of every `stride`-th row searched afresh (greedy
    `search` with the target parameters; a strided choice splits evenly over devices).

    Runs before the gradient step, outside `jax.grad`: fresh targets are data, as stored
    ones are, and a search with the slowly moving target network is stabler than one
    with the parameters being updated.
    """
    if reanalyse_fraction == 0:
        return batch.policy
    K = unroll_steps
    obs_shape = batch.obs.shape[2:]
    num_actions = batch.policy.shape[-1]
    stride = max(1, round(1.0 / reanalyse_fraction))
    rows = jnp.arange(0, batch.obs.shape[0], stride)
    count = rows.shape[0] * (K + 1)
    obs = batch.obs[rows, : K + 1].reshape(count, *obs_shape)
    legal = batch.legal[rows, : K + 1].reshape(count, num_actions)
    fresh = search(target_params, obs, legal, key, greedy=True).policy
    fresh = fresh.reshape(rows.shape[0], K + 1, num_actions)
    return batch.policy.at[rows, : K + 1].set(fresh)
