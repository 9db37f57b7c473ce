"""MuZero's loss along sampled sequences: the model unrolled K steps from each start, scored
against value, reward and policy targets (and, with rule heads, the stored legal moves and
episode ends), each unroll step after the first weighing 1/K.

Shapes: sequences [B, L, ...] (L = K + n); unroll steps 0..K [B, K+1, ...]; the K moves
between them [B, K, ...]; `bins` the size of a categorical support.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl_sys.agents.muzero.config import Config
from jaxrl_sys.agents.muzero.networks import (
    MuZeroNetwork, observation_values, represent_predict, scale_gradient,
)
from jaxrl_sys.agents.muzero.targets import (
    Batch, bootstrapped_value_targets, search_value_targets, unroll_masks,
)
from jaxrl_sys.core.types import Metrics
from jaxrl_sys.core.value_transform import Support, logits_to_scalar, scalar_to_probs


class Unroll(NamedTuple):
    """The learned model's logits along sampled sequences: policy [B, K+1, A], value
    [B, K+1, bins], reward [B, K, bins], legal moves [B, K+1, A], episode end [B, K]; the
    latents the dynamics predicted for steps 1..K [B, K, D]; and the representation's latent
    of step 0 [B, D]."""

    policy: jax.Array
    value: jax.Array
    reward: jax.Array
    legal: jax.Array
    end: jax.Array
    latent: jax.Array
    first_latent: jax.Array


def unroll_step_weights(unroll_steps: int) -> np.ndarray:
    """Loss weights [K+1] of the unroll steps: 1 for step 0, 1/K for each later step.

    Args:
        unroll_steps: the unroll steps K.

    Returns:
        [K+1] float32 weights.
    """
    K = unroll_steps
    return np.concatenate([np.ones(1), np.full(K, 1.0 / K)]).astype(np.float32)


def unroll_model(network: MuZeroNetwork, params, first_obs: jax.Array, actions: jax.Array,
                 dynamics_grad_scale: float) -> Unroll:
    """The model's predictions along sequences from first observations [B, ...] and moves
    [B, K]: step 0 from the representation, steps 1..K from the learned dynamics.

    As in the paper's `update_weights`, each step's own predictions reach the dynamics at
    full strength; only the gradient flowing back from later steps through the latent passed
    on to the next dynamics step is scaled by `dynamics_grad_scale`.

    Args:
        network: the MuZero network.
        params (PyTree): its parameters.
        first_obs: [B, ...] the sequences' first observations.
        actions: [B, K] int moves.
        dynamics_grad_scale: the factor of the gradient through each latent passed on.

    Returns:
        The logits: policy [B, K+1, A], value [B, K+1, bins], reward [B, K, bins], legal
            [B, K+1, A], end [B, K]; the latents [B, K, D] of steps 1..K and [B, D] of step 0.
    """
    latent = network.apply(params, first_obs, method=MuZeroNetwork.represent)
    first = network.apply(params, latent, method=MuZeroNetwork.predict)

    def unroll(latent, action):
        """One dynamics step of latents [B, D] by moves [B], then prediction."""
        latent, reward_logits, end_logit = network.apply(
            params, latent, action, method=MuZeroNetwork.dynamics
        )
        later = network.apply(params, latent, method=MuZeroNetwork.predict)
        return (scale_gradient(latent, dynamics_grad_scale),
                (reward_logits, end_logit, later, latent))

    first_latent = latent
    _, (reward_logits, end_logits, later, latents) = jax.lax.scan(unroll, latent, actions.T,
                                                                  unroll=True)
    # [B, K+1, .]: step 0 from the representation, steps 1..K from the dynamics
    policy_all, value_all, legal_all = (
        jnp.concatenate([at_0[:, None], at_k.swapaxes(0, 1)], 1)
        for at_0, at_k in zip(first, later)
    )
    return Unroll(policy_all, value_all, reward_logits.swapaxes(0, 1), legal_all,
                  end_logits.swapaxes(0, 1), latents.swapaxes(0, 1), first_latent)


def rules_loss(unrolled: Unroll, legal: jax.Array, terminated: jax.Array, alive: jax.Array,
               step_weights: np.ndarray) -> jax.Array:
    """Per-row cross-entropy of the rule heads [B]: legal moves [B, K+1, A] at the real
    states 0..K (mean over moves) and whether each of the moves 0..K-1 ended the episode
    (`terminated` [B, K]); `alive` [B, K+1] masks the steps.

    Args:
        unrolled: `unroll_model`'s predictions.
        legal: bool [B, K+1, A] legal moves at the real states 0..K.
        terminated: bool [B, K] whether each move ended the episode.
        alive: [B, K+1] float mask of the steps.
        step_weights: [K+1] weights (`unroll_step_weights`).

    Returns:
        [B] losses.
    """
    K = terminated.shape[1]
    legal_ce = optax.sigmoid_binary_cross_entropy(
        unrolled.legal, legal.astype(jnp.float32)).mean(-1)
    end_ce = optax.sigmoid_binary_cross_entropy(unrolled.end, terminated.astype(jnp.float32))
    return (jnp.sum(legal_ce * alive * step_weights, 1)
            + jnp.sum(end_ce * alive[:, :K] * step_weights[1:], 1))


def consistency_loss(network: MuZeroNetwork, params, predicted_latents: jax.Array,
                     reached_obs: jax.Array, alive: jax.Array, step_weights: np.ndarray
                     ) -> jax.Array:
    """EfficientZero's consistency loss per row [B]: the negative cosine similarity between
    the predictor's output for each latent the dynamics predicted [B, K, D] and the
    projection of the representation of the observation reached [B, K, ...], which gets no
    gradient (SimSiam); `alive` [B, K] masks the steps, weighed as the other losses.

    Args:
        network: the MuZero network.
        params (PyTree): its parameters.
        predicted_latents: [B, K, D] latents of steps 1..K from the dynamics.
        reached_obs: [B, K, ...] the observations reached at steps 1..K.
        alive: [B, K] float mask of the steps.
        step_weights: [K+1] weights (`unroll_step_weights`; steps 1..K used).

    Returns:
        [B] losses.
    """
    b, k = predicted_latents.shape[:2]
    flat = lambda x: x.reshape(b * k, *x.shape[2:])  # noqa: E731
    online = network.apply(params, network.apply(params, flat(predicted_latents),
                                                 method=MuZeroNetwork.project),
                           method=MuZeroNetwork.predict_projection)
    reached = network.apply(params, flat(reached_obs), method=MuZeroNetwork.represent)
    target = jax.lax.stop_gradient(network.apply(params, reached, method=MuZeroNetwork.project))
    unit = lambda x: x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-8)  # noqa: E731
    similarity = jnp.sum(unit(online) * unit(target), -1).reshape(b, k)
    return -jnp.sum(similarity * alive * step_weights[1:], 1)


def reconstruction_loss(network: MuZeroNetwork, params, unrolled: Unroll,
                        observations: jax.Array, alive: jax.Array, step_weights: np.ndarray
                        ) -> jax.Array:
    """The decoder's squared error per row [B]: each latent of steps 0..K (the
    representation's, then the dynamics') decoded against the real observation of its step
    [B, K+1, ...], mean over the observation's entries; `alive` [B, K+1] masks the steps,
    weighed as the other losses. Its gradient reaches the dynamics through every predicted
    latent, so the model must carry what each move does to the board.

    Args:
        network: the MuZero network (with its decoder).
        params (PyTree): its parameters.
        unrolled: `unroll_model`'s latents.
        observations: [B, K+1, ...] the real observations of steps 0..K.
        alive: [B, K+1] float mask of the steps.
        step_weights: [K+1] weights (`unroll_step_weights`).

    Returns:
        [B] losses.
    """
    b, k = unrolled.latent.shape[:2]
    latents = jnp.concatenate([unrolled.first_latent[:, None], unrolled.latent], 1)
    decoded = network.apply(params, latents.reshape(b * (k + 1), *latents.shape[2:]),
                            method=MuZeroNetwork.decode).reshape(b, k + 1, -1)
    error = jnp.mean(jnp.square(decoded - observations.reshape(b, k + 1, -1)), -1)
    return jnp.sum(error * alive * step_weights, 1)


def mixed_value_targets(returns: jax.Array, root_values: jax.Array, mix: float) -> jax.Array:
    """Value targets [B, K+1]: the n-step returns z [B, K+1] moved towards the stored search
    root values q [B, K+1] of the same positions by `mix` ((1 - mix) z + mix q).

    z of a board game is its result, true but noisy for early positions; q is the search's
    estimate when the move was played, less noisy but biased by the network of its day.

    Args:
        returns: [B, K+1] n-step value targets z.
        root_values: [B, K+1] stored root values q.
        mix: the weight of q, in [0, 1].

    Returns:
        [B, K+1] value targets.
    """
    if mix == 0:
        return returns
    return (1.0 - mix) * returns + mix * root_values


def categorical_cross_entropy(logits: jax.Array, scalar: jax.Array, support: Support
                              ) -> jax.Array:
    """Cross-entropy [...] of logits [..., bins] against raw scalar targets [...], encoded
    as two-hot probabilities of h(target) on `support`.

    Args:
        logits: [..., bins] logits.
        scalar: [...] raw scalar targets.
        support: the support (in h-space).

    Returns:
        [...] cross-entropies.
    """
    return optax.softmax_cross_entropy(logits, scalar_to_probs(scalar, support))


class PredictionLosses(NamedTuple):
    """Per-row losses [B] of value, policy and reward, masked and weighted per unroll step."""

    value: jax.Array
    policy: jax.Array
    reward: jax.Array


def prediction_losses(policy_logits: jax.Array, value_logits: jax.Array,
                      reward_logits: jax.Array, policy_targets: jax.Array,
                      value_targets: jax.Array, reward_targets: jax.Array,
                      policy_mask: jax.Array, value_mask: jax.Array, reward_mask: jax.Array,
                      step_weights: np.ndarray, value_support: Support,
                      reward_support: Support) -> PredictionLosses:
    """Masked cross-entropies summed over unroll steps: policy logits [B, K+1, A] against
    policies [B, K+1, A], value logits [B, K+1, bins] against scalars [B, K+1] and reward
    logits [B, K, bins] against scalars [B, K]; masks are float [B, K+1] / [B, K].

    Args:
        policy_logits: [B, K+1, A] policy logits.
        value_logits: [B, K+1, bins] value logits.
        reward_logits: [B, K, bins] reward logits.
        policy_targets: [B, K+1, A] target policies (probabilities).
        value_targets: [B, K+1] raw scalar value targets.
        reward_targets: [B, K] raw scalar reward targets.
        policy_mask: float [B, K+1].
        value_mask: float [B, K+1].
        reward_mask: float [B, K].
        step_weights: [K+1] weights (`unroll_step_weights`).
        value_support: the value support (in h-space).
        reward_support: the reward support (in h-space).

    Returns:
        The value, policy and reward losses, each [B].
    """
    value_ce = categorical_cross_entropy(value_logits, value_targets, value_support)
    reward_ce = categorical_cross_entropy(reward_logits, reward_targets, reward_support)
    policy_ce = optax.softmax_cross_entropy(policy_logits, policy_targets)
    return PredictionLosses(
        value=jnp.sum(value_ce * value_mask * step_weights, 1),
        policy=jnp.sum(policy_ce * policy_mask * step_weights, 1),
        reward=jnp.sum(reward_ce * reward_mask * step_weights[1:], 1),
    )


def muzero_loss(params, target_params, batch: Batch, *, network: MuZeroNetwork,
                config: Config, value_support: Support, reward_support: Support,
                discount: float) -> tuple[jax.Array, tuple[jax.Array, Metrics]]:
    """The IS-weighted mean loss over sequences [B, L, ...], and (value error [B] at each
    row's first step, the new priorities; loss metrics).

    Learned model: value and reward are also trained at absorbing steps past a termination
    (towards 0), the policy only at real states. Env model (AlphaZero): the network predicts
    at the stored real positions 0..K and nothing is unrolled. `discount` is the n-step
    targets' (-gamma in a two-player game).

    Args:
        params (PyTree): the online parameters (differentiate with respect to these).
        target_params (PyTree): the target parameters, which value the bootstrap observations
            (unused with `value_bootstrap="search"`).
        batch: sequences [B, L, ...] (L = K + n) with importance weights [B].
        network: the MuZero network.
        config: MuZero's Config (`unroll_steps` K, `n_step` n, `model`, the loss weights).
        value_support: the value support (in h-space).
        reward_support: the reward support (in h-space).
        discount: the n-step targets' discount (-gamma in a two-player game).

    Returns:
        loss: the scalar loss.
        aux: (value errors [B] at each row's first step, the new priorities; scalar metrics
            `value_loss`, `policy_loss`, `reward_loss`, `value_target_mean`, and `rules_loss` and
            `consistency_loss` and `reconstruction_loss` where those losses are on).
    """
    K = config.unroll_steps
    step_weights = unroll_step_weights(K)
    alive, absorbing = unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
    if config.value_bootstrap == "search":
        z = search_value_targets(batch.reward, batch.root_value, batch.terminated,
                                 batch.truncated, batch.valid, K, config.n_step, discount)
    else:
        value_fn = lambda obs: observation_values(network, value_support, target_params, obs)  # noqa: E731
        z = jax.lax.stop_gradient(
            bootstrapped_value_targets(batch, value_fn, K, config.n_step, discount))
    z = mixed_value_targets(z, batch.root_value[:, : K + 1], config.value_target_mix)
    z = jnp.where(alive, z, 0.0)
    policy_targets = batch.policy[:, : K + 1]
    policy_mask = alive.astype(jnp.float32)
    reward_targets = jnp.where(alive[:, :K], batch.reward[:, :K], 0.0)
    rule_loss = jnp.zeros(batch.obs.shape[0])
    consistency = jnp.zeros(batch.obs.shape[0])
    reconstruction = jnp.zeros(batch.obs.shape[0])
    if config.model == "env":
        value_mask = policy_mask
        reward_mask = jnp.zeros_like(value_mask[:, :K])
        rows = batch.obs.shape[0]
        positions = batch.obs[:, : K + 1].reshape(rows * (K + 1), *batch.obs.shape[2:])
        _, policy_all, value_all = represent_predict(network, params, positions)
        policy_all = policy_all.reshape(rows, K + 1, -1)
        value_all = value_all.reshape(rows, K + 1, -1)
        reward_logits = jnp.zeros((rows, K, config.support_bins))
    else:
        value_mask = (alive | absorbing).astype(jnp.float32)
        reward_mask = value_mask[:, :K]
        unrolled = unroll_model(network, params, batch.obs[:, 0], batch.action[:, :K],
                                config.dynamics_grad_scale)
        policy_all, value_all = unrolled.policy, unrolled.value
        reward_logits = unrolled.reward
        if config.learns_rules:
            rule_loss = rules_loss(unrolled, batch.legal[:, : K + 1], batch.terminated[:, :K],
                                   policy_mask, step_weights)
        if config.consistency_loss_weight > 0:
            consistency = consistency_loss(network, params, unrolled.latent,
                                           batch.obs[:, 1: K + 1], policy_mask[:, 1:],
                                           step_weights)
        if config.reconstruction_loss_weight > 0:
            reconstruction = reconstruction_loss(network, params, unrolled,
                                                 batch.obs[:, : K + 1].astype(jnp.float32),
                                                 policy_mask, step_weights)
    terms = prediction_losses(policy_all, value_all, reward_logits, policy_targets, z,
                              reward_targets, policy_mask, value_mask, reward_mask,
                              step_weights, value_support, reward_support)
    per_row = (config.value_loss_weight * terms.value + terms.policy + terms.reward
               + config.rule_loss_weight * rule_loss
               + config.consistency_loss_weight * consistency
               + config.reconstruction_loss_weight * reconstruction)
    loss = jnp.mean(batch.weights * per_row)
    value_error = jnp.abs(logits_to_scalar(value_all[:, 0], value_support) - z[:, 0])
    aux = {
        "value_loss": jnp.mean(terms.value),
        "policy_loss": jnp.mean(terms.policy),
        "reward_loss": jnp.mean(terms.reward),
        "value_target_mean": jnp.mean(z[:, 0]),
    }
    if config.learns_rules:
        aux["rules_loss"] = jnp.mean(rule_loss)
    if config.consistency_loss_weight > 0:
        aux["consistency_loss"] = jnp.mean(consistency)
    if config.reconstruction_loss_weight > 0:
        aux["reconstruction_loss"] = jnp.mean(reconstruction)
    return loss, (value_error, aux)
