"""DQN's targets and loss as pure functions of Q-values and replayed sequences.

A replayed item is a sequence of `n` steps `Batch` ([B, n, ...], see `replay.SequenceBatch`);
its target sums the rewards up to the first episode end (or the replay's write head) and
bootstraps from the one next state there (`core.returns.n_step_targets`). Double Q-learning
picks that state's action with the online network and values it with the target network;
advantage learning lowers the target by the taken action's gap to the best action.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.core import replay
from jaxrl_sys.core.returns import bootstrap_step, n_step_return_and_discount, n_step_targets

Batch = replay.SequenceBatch  # sampled n-step sequences [B, n, ...], importance weights [B]


@struct.dataclass
class Draw:
    """The randomness of one network pass over a batch [B]: `key` (the same on every device)
    draws the noisy layers' noise once for the pass, as Fortunato et al. do per batch; `rows`
    [B] (keyed by each row's global index) draw IQN's fractions per row. A batch split over
    devices thus draws what one device would."""

    key: jax.Array
    rows: jax.Array

    def fold(self, index: int) -> "Draw":
        """The draw of an independent pass (online and target passes differ).

        Args:
            index: which pass.

        Returns:
            The pass's randomness: both keys folded with `index`.
        """
        return Draw(jax.random.fold_in(self.key, index),
                    jax.vmap(jax.random.fold_in, (0, None))(self.rows, index))


# (params, obs [B, ...], a pass's randomness (`Draw`) or None) -> Q-values [B, A]
ApplyFn = Callable[[Any, jax.Array, Optional[Draw]], jax.Array]
# (params, obs [B, ...], a pass's randomness or None) -> (per-action distributions [B, A, N]:
# C51 logits, QR or IQN quantiles; IQN's fractions [B, N] or None)
DistributionFn = Callable[[Any, jax.Array, Optional[Draw]],
                          tuple[jax.Array, Optional[jax.Array]]]


def independent_draw(draw: Optional[Draw], index: int) -> Optional[Draw]:
    """The randomness of a loss's `index`-th network pass (online and target passes each
    draw their own noise and fractions); None stays None.

    Args:
        draw: the loss's randomness, or None.
        index: which pass.

    Returns:
        The pass's randomness, or None.
    """
    return None if draw is None else draw.fold(index)


def taken_values(q: jax.Array, actions: jax.Array) -> jax.Array:
    """Q-values [B] of `actions` [B, 1] (int32) in `q` [B, A].

    Args:
        q: [B, A] Q-values.
        actions: [B, 1] int32 actions.

    Returns:
        [B] Q-values.
    """
    return jnp.take_along_axis(q, actions, axis=-1)[:, 0]


def bootstrap_observations(batch: Batch) -> jax.Array:
    """Next observations [B, ...] at each sequence's bootstrap step (`bootstrap_step`):
    `n_step_targets` reads only that next value, so the networks see only these states.

    Args:
        batch: sequences [B, n, ...].

    Returns:
        [B, ...] next observations.
    """
    stop = bootstrap_step(batch.terminated, batch.truncated, batch.valid)
    obs_dims = batch.next_obs.ndim - 2
    return jnp.take_along_axis(
        batch.next_obs, stop.reshape(-1, 1, *([1] * obs_dims)), axis=1
    )[:, 0]


def bootstrap_values(q_target_next: jax.Array, q_online_next: Optional[jax.Array]) -> jax.Array:
    """Values [B] of next states: the target network's Q [B, A] at the action that the online
    network's Q [B, A] ranks best (double Q-learning), or at its own best when that is None.

    Args:
        q_target_next: [B, A] the target network's Q-values of the next states.
        q_online_next: [B, A] the online network's (double Q-learning), or None.

    Returns:
        [B] values.
    """
    chooser = q_target_next if q_online_next is None else q_online_next
    next_actions = jnp.argmax(chooser, axis=-1)
    return taken_values(q_target_next, next_actions[:, None])


def q_targets(batch: Batch, next_values: jax.Array, gamma: float) -> jax.Array:
    """n-step targets [B] of sequences [B, n] bootstrapped from `next_values` [B] (the value
    of each sequence's bootstrap state), with no gradient through the bootstrap.

    Args:
        batch: sequences [B, n, ...].
        next_values: [B] values of the bootstrap states (`bootstrap_values`).
        gamma: the discount.

    Returns:
        [B] targets.
    """
    next_values = jax.lax.stop_gradient(
        jnp.broadcast_to(next_values[:, None], batch.reward.shape)
    )
    return n_step_targets(batch.reward, next_values, batch.terminated, batch.truncated,
                          batch.valid, gamma)


def action_gap(q: jax.Array, actions: jax.Array) -> jax.Array:
    """How far [B] the taken `actions` [B, 1] fall below the best action in `q` [B, A].

    Args:
        q: [B, A] Q-values.
        actions: [B, 1] int32 actions.

    Returns:
        [B] gaps, 0 or more.
    """
    q_taken = taken_values(q, actions)
    return jnp.max(q, axis=-1) - q_taken


def advantage_learning_targets(targets: jax.Array, q_target_now: jax.Array, actions: jax.Array,
                               coefficient: float) -> jax.Array:
    """Targets [B] lowered by `coefficient` times the action gap under the target network's
    Q [B, A] at the sequences' first states (Bellemare et al. 2016): it widens small gaps
    between actions, so the greedy policy stops flipping between near-equal ones.

    Args:
        targets: [B] targets (`q_targets`).
        q_target_now: [B, A] the target network's Q-values of the sequences' first states.
        actions: [B, 1] int32 taken actions.
        coefficient: the weight of the gap.

    Returns:
        [B] targets.
    """
    gap = action_gap(jax.lax.stop_gradient(q_target_now), actions)
    return targets - coefficient * gap


def td_loss(td_error: jax.Array, weights: Optional[jax.Array], huber_delta: float) -> jax.Array:
    """The mean Huber loss [] of TD errors [B], weighted per item by `weights` [B]
    (prioritised replay's importance weights) if given. A delta well above 1 keeps the loss
    near squared error where returns run to the hundreds (with delta 1 it is sign-only).

    Args:
        td_error: [B] TD errors.
        weights: [B] importance weights, or None.
        huber_delta: the Huber loss's delta.

    Returns:
        The scalar loss.
    """
    huber = optax.huber_loss(td_error, delta=huber_delta)
    return jnp.mean(huber) if weights is None else jnp.mean(weights * huber)


def q_learning_loss(params: Any, target_params: Any, batch: Batch,
                    draw: Optional[Draw] = None, *, apply_fn: ApplyFn, gamma: float,
                    double_q: bool, advantage_learning: float,
                    huber_delta: float) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """DQN's loss on sequences [B, n, ...]: (loss [], (TD errors [B], mean taken Q [])).

    Differentiate with respect to `params` (the online network); `target_params` only value
    next states and, with `advantage_learning` > 0, measure the action gap.

    Args:
        params: the online network's parameters.
        target_params: the target network's parameters.
        batch: sequences [B, n, ...] with importance weights [B].
        draw: randomness for noisy layers (each pass its own), or None.
        apply_fn: `apply_fn(params, obs [B, ...], draw or None) -> Q-values [B, A]`.
        gamma: the discount.
        double_q: whether the online network picks the next actions.
        advantage_learning: the action gap's weight (0: off).
        huber_delta: the Huber loss's delta.

    Returns:
        loss: the scalar loss.
        aux: (TD errors [B], scalar mean Q-value of the taken actions).
    """
    boot_obs = bootstrap_observations(batch)
    q_target_next = apply_fn(target_params, boot_obs, independent_draw(draw, 0))
    q_online_next = apply_fn(params, boot_obs, independent_draw(draw, 1)) if double_q else None
    targets = q_targets(batch, bootstrap_values(q_target_next, q_online_next), gamma)
    taken = batch.action[:, 0, None].astype(jnp.int32)
    if advantage_learning:
        q_target_now = apply_fn(target_params, batch.obs[:, 0], independent_draw(draw, 3))
        targets = advantage_learning_targets(targets, q_target_now, taken, advantage_learning)
    q_taken = taken_values(apply_fn(params, batch.obs[:, 0], independent_draw(draw, 2)), taken)
    td_error = q_taken - targets
    return td_loss(td_error, batch.weights, huber_delta), (td_error, jnp.mean(q_taken))


# Distributional losses (Rainbow's options), on rlax's projection and quantile maths.


def c51_target(support: jax.Array, next_probs: jax.Array, returns: jax.Array,
               discounts: jax.Array) -> jax.Array:
    """C51's target distributions [B, N]: each row's next-state distribution `next_probs`
    [B, N] on `support` [N], moved to `returns + discounts * support` and projected back
    onto `support` (Bellemare et al. 2017), mass beyond the ends going to the end atoms.

    Args:
        support: [N] atoms, evenly spaced and increasing.
        next_probs: [B, N] probabilities of the bootstrap state's chosen action.
        returns: [B] discounted rewards up to the bootstrap (n-step: summed).
        discounts: [B] the bootstrap's discount (0 where the episode terminated).

    Returns:
        [B, N] probabilities on `support`.
    """
    import rlax  # lazy: rlax brings distrax and TFP (1.2 s of import); only C51 needs it here

    moved = returns[:, None] + discounts[:, None] * support[None, :]
    return jax.vmap(rlax.categorical_l2_project, in_axes=(0, 0, None))(
        moved, next_probs, support)


def c51_loss(logits: jax.Array, target_probs: jax.Array) -> jax.Array:
    """Cross-entropy [B] of the taken actions' distributions (logits [B, N]) against fixed
    C51 targets [B, N].

    Args:
        logits: [B, N] logits of the taken actions.
        target_probs: [B, N] `c51_target`'s probabilities (no gradient flows into them).

    Returns:
        [B] losses.
    """
    return -jnp.sum(jax.lax.stop_gradient(target_probs) * jax.nn.log_softmax(logits), axis=-1)


def quantile_huber_loss(quantiles: jax.Array, taus: jax.Array, targets: jax.Array,
                        kappa: float = 1.0) -> jax.Array:
    """QR-DQN's quantile Huber loss [B] (Dabney et al. 2018) of predicted quantiles [B, N] at
    fractions `taus` [B, N] against target samples [B, M] (the target distribution's
    quantiles, no gradient); `kappa` 0 is plain quantile regression. IQN takes the same loss
    with sampled fractions.

    Args:
        quantiles: [B, N] predicted quantile values.
        taus: [B, N] their fractions in (0, 1).
        targets: [B, M] target samples.
        kappa: the Huber threshold.

    Returns:
        [B] losses.
    """
    import rlax  # lazy: as in `c51_target`

    return jax.vmap(rlax.quantile_regression_loss, in_axes=(0, 0, 0, None))(
        quantiles, taus, targets, kappa)


def quantile_fractions(num_quantiles: int) -> jax.Array:
    """QR-DQN's fixed quantile midpoints [N]: (2i + 1) / 2N for i < N.

    Args:
        num_quantiles: N.

    Returns:
        [N] fractions in (0, 1).
    """
    return (jnp.arange(num_quantiles, dtype=jnp.float32) + 0.5) / num_quantiles


def distributional_q_loss(params: Any, target_params: Any, batch: Batch,
                          draw: Optional[Draw] = None, *, distribution_fn: DistributionFn, q_fn: Callable[[jax.Array], jax.Array],
                          kind: str, support: jax.Array, gamma: float, double_q: bool,
                          kappa: float) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """C51's, QR-DQN's or IQN's loss on sequences [B, n, ...]: (loss [], (per-item losses
    [B], mean taken Q [])). The per-item losses are what prioritised replay ranks by
    (Rainbow's choice for C51).

    The n-step return and discount move the bootstrap state's distribution of its chosen
    action (the online network's argmax with `double_q`, else the target's), which is then
    C51's projection onto the atoms, or the target samples of QR (at fixed fractions) and
    IQN (at the fractions the target pass drew; the online pass regresses at its own).

    Args:
        params: the online network's parameters.
        target_params: the target network's parameters.
        batch: sequences [B, n, ...] with importance weights [B].
        draw: randomness for noisy layers and IQN's fractions (each pass its own), or None
            (no noise; IQN at midpoint fractions).
        distribution_fn: `distribution_fn(params, obs [B, ...], draw or None) -> ([B, A, N],
            IQN's fractions [B, N] or None)`.
        q_fn: Q-values [B, A] of `distribution_fn`'s output (`networks.q_values`).
        kind: "c51", "qr" or "iqn".
        support: [N] C51's atoms (unused by QR).
        gamma: the discount.
        double_q: whether the online network picks the next actions.
        kappa: QR's and IQN's Huber threshold.

    Returns:
        loss: the scalar loss.
        aux: (per-item losses [B], scalar mean Q-value of the taken actions).
    """
    boot_obs = bootstrap_observations(batch)
    next_target, _ = distribution_fn(target_params, boot_obs, independent_draw(draw, 0))
    chooser = (distribution_fn(params, boot_obs, independent_draw(draw, 1))[0] if double_q
               else next_target)
    next_actions = jnp.argmax(q_fn(chooser), axis=-1)
    next_dist = jax.lax.stop_gradient(
        jnp.take_along_axis(next_target, next_actions[:, None, None], axis=1)[:, 0])  # [B, N]
    returns, discounts = n_step_return_and_discount(
        batch.reward, batch.terminated, batch.truncated, batch.valid, gamma)
    taken = batch.action[:, 0, None].astype(jnp.int32)
    now, now_taus = distribution_fn(params, batch.obs[:, 0], independent_draw(draw, 2))
    taken_dist = jnp.take_along_axis(now, taken[:, :, None], axis=1)[:, 0]  # [B, N]
    if kind == "c51":
        target = c51_target(support, jax.nn.softmax(next_dist, axis=-1), returns, discounts)
        item_loss = c51_loss(taken_dist, target)
    else:
        samples = returns[:, None] + discounts[:, None] * next_dist
        taus = (now_taus if now_taus is not None
                else jnp.broadcast_to(quantile_fractions(taken_dist.shape[-1]), taken_dist.shape))
        item_loss = quantile_huber_loss(taken_dist, taus, jax.lax.stop_gradient(samples), kappa)
    q_taken = taken_values(q_fn(now), taken)
    loss = jnp.mean(item_loss) if batch.weights is None else jnp.mean(batch.weights * item_loss)
    return loss, (item_loss, jnp.mean(q_taken))
