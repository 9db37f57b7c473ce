"""Return and advantage estimators over time-major trajectories.

Every estimator takes `next_values`, the value of the state actually reached after each step
(the pre-reset `final_observation` when an episode ended). That one array makes truncation
and termination exact: truncated steps bootstrap from it, terminated steps do not, and no
recursion crosses an episode boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation; arrays are [T, ...]. Returns (advantages, returns).

    delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1},   done = terminated | truncated

    Args:
        rewards: [T, ...] rewards (e.g. [T, B]).
        values: [T, ...] values V(s_t).
        next_values: [T, ...] values of the states reached after each step.
        terminated: bool [T, ...].
        truncated: bool [T, ...].
        gamma: the discount.
        lam: the GAE lambda.

    Returns:
        advantages: [T, ...] advantages.
        returns: [T, ...] value targets, advantages + values.
    """
    not_terminated = 1.0 - terminated.astype(values.dtype)
    not_done = 1.0 - jnp.logical_or(terminated, truncated).astype(values.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values

    def backward(carry: jax.Array, x: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        delta, continues = x
        advantage = delta + gamma * lam * continues * carry
        return advantage, advantage

    # unrolled 16 steps a loop iteration: an accelerator launches a few kernels per
    # iteration, and this body is a couple of multiply-adds (the same bits at any unroll)
    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(values[0]), (deltas, not_done), reverse=True, unroll=16
    )
    return advantages, advantages + values


def episode_returns(rewards: jax.Array, terminated: jax.Array, truncated: jax.Array,
                    gamma: float) -> tuple[jax.Array, jax.Array]:
    """REINFORCE's whole-episode returns: each step's discounted reward-to-go to the end of its
    episode, and whether that end lies inside the rollout. Arrays are [T, ...]; an episode
    ends where it terminates or is truncated, and nothing is bootstrapped, so the return of a
    step whose episode runs past the rollout's end is unknown (`complete` False).

    G_t = r_t + gamma * (1 - done_t) * G_{t+1},  complete_t = done_t or complete_{t+1}

    Args:
        rewards: [T, ...] rewards.
        terminated: bool [T, ...].
        truncated: bool [T, ...].
        gamma: the discount.

    Returns:
        returns: [T, ...] discounted rewards to the episode's end (partial where not complete).
        complete: bool [T, ...] whether the step's episode ends within the rollout.
    """
    done = jnp.logical_or(terminated, truncated)

    def backward(carry, x):
        """One step back: the return and completeness of step t from those of t + 1."""
        following, ends_ahead = carry
        reward, ends = x
        value = reward + gamma * jnp.where(ends, 0.0, following)
        complete = jnp.logical_or(ends, ends_ahead)
        return (value, complete), (value, complete)

    start = (jnp.zeros_like(rewards[0]), jnp.zeros(rewards.shape[1:], jnp.bool_))
    _, (returns, complete) = jax.lax.scan(backward, start, (rewards, done), reverse=True,
                                          unroll=16)
    return returns, complete


def bootstrap_step(terminated: jax.Array, truncated: jax.Array, valid: jax.Array) -> jax.Array:
    """Index [B] of the step of sequences [B, n] whose next state `n_step_targets`
    bootstraps from: the first episode end, or the last valid step, or n - 1.

    Only that one next value is read, so learners evaluate their target network there alone.

    Args:
        terminated: bool [B, n].
        truncated: bool [B, n].
        valid: bool [B, n], as `gather_sequences` gives it.

    Returns:
        [B] int32 step indices.
    """
    next_valid = jnp.concatenate([valid[:, 1:], jnp.zeros_like(valid[:, :1])], axis=1)
    return jnp.argmax(terminated | truncated | ~next_valid, axis=1)


def n_step_targets(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    valid: jax.Array,
    gamma: float,
) -> jax.Array:
    """n-step bootstrapped targets for sequences [B, n] starting at each sampled item.

    Sums discounted rewards from step 0 until the first episode end or the last valid step
    (a sequence cut short by the replay's write head), then bootstraps from `next_values`
    of that step, the value of the state actually reached, unless it was terminated.
    Step 0 must be valid. Returns [B].

    Args:
        rewards: [B, n] rewards.
        next_values: [B, n] values of the states reached after each step.
        terminated: bool [B, n].
        truncated: bool [B, n].
        valid: bool [B, n], as `gather_sequences` gives it.
        gamma: the discount.

    Returns:
        [B] targets.
    """
    rewards, next_values = rewards.T, next_values.T  # time-major [n, B]
    terminated, truncated, valid = terminated.T, truncated.T, valid.T
    continues = ~(terminated | truncated) & jnp.concatenate(
        [valid[1:], jnp.zeros_like(valid[:1])], axis=0
    )
    not_terminated = 1.0 - terminated.astype(rewards.dtype)

    def backward(later: jax.Array, x) -> tuple[jax.Array, None]:
        reward, next_value, keep_going, alive = x
        target = reward + gamma * alive * jnp.where(keep_going, later, next_value)
        return target, None

    target, _ = jax.lax.scan(
        backward, jnp.zeros_like(rewards[0]),
        (rewards, next_values, continues, not_terminated), reverse=True,
    )
    return target


def n_step_return_and_discount(
    rewards: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    valid: jax.Array,
    gamma: float,
) -> tuple[jax.Array, jax.Array]:
    """The two parts of `n_step_targets` for sequences [B, n]: the discounted reward sum [B]
    up to the bootstrap step and the discount [B] its next value takes (0 where the episode
    terminated), so that target = return + discount * value. Distributional targets move a
    whole next-state distribution by them rather than one value.

    Args:
        rewards: [B, n] rewards.
        terminated: bool [B, n].
        truncated: bool [B, n].
        valid: bool [B, n], as `gather_sequences` gives it.
        gamma: the discount.

    Returns:
        returns: [B] discounted reward sums.
        discounts: [B] the bootstrap's discount.
    """
    rewards = rewards.T  # time-major [n, B]
    terminated, truncated, valid = terminated.T, truncated.T, valid.T
    continues = ~(terminated | truncated) & jnp.concatenate(
        [valid[1:], jnp.zeros_like(valid[:1])], axis=0
    )
    not_terminated = 1.0 - terminated.astype(rewards.dtype)

    def backward(later: tuple[jax.Array, jax.Array], x) -> tuple[tuple[jax.Array, jax.Array], None]:
        later_return, later_discount = later
        reward, keep_going, alive = x
        scale = gamma * alive
        step_return = reward + scale * jnp.where(keep_going, later_return, 0.0)
        step_discount = scale * jnp.where(keep_going, later_discount, 1.0)
        return (step_return, step_discount), None

    zeros = jnp.zeros_like(rewards[0])
    (returns, discounts), _ = jax.lax.scan(
        backward, (zeros, zeros), (rewards, continues, not_terminated), reverse=True,
    )
    return returns, discounts


def n_step_sequence_targets(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    n: int,
    gamma: float,
) -> jax.Array:
    """n-step bootstrapped targets [T, B] for every step of time-major sequences [T, B].

    Step t's target is `n_step_targets` of the window of steps t .. t + n - 1: rewards summed
    up to the first episode end in it, or to the sequence's last step (the horizon shortens
    there), then `next_values` of that step (the value of the state actually reached after it,
    its pre-reset next observation) unless it was terminated.

    Args:
        rewards: [T, B] rewards.
        next_values: [T, B] values of the states reached after each step.
        terminated: bool [T, B].
        truncated: bool [T, B].
        n: the horizon.
        gamma: the discount.

    Returns:
        [T, B] targets.
    """
    steps = rewards.shape[0]
    index = jnp.arange(steps)[:, None] + jnp.arange(n)[None, :]  # [T, n]
    valid = jnp.broadcast_to((index < steps)[:, None, :], (steps, rewards.shape[1], n))
    index = jnp.minimum(index, steps - 1)

    def windows(x: jax.Array) -> jax.Array:
        """[T, B] as windows [T * B, n]: row (t, b) holds steps t .. t + n - 1 of b."""
        return jnp.swapaxes(x[index], 1, 2).reshape(-1, n)

    targets = n_step_targets(windows(rewards), windows(next_values), windows(terminated),
                             windows(truncated), valid.reshape(-1, n), gamma)
    return targets.reshape(rewards.shape)


def importance_weights(target_log_probs: jax.Array, behaviour_log_probs: jax.Array) -> jax.Array:
    """rho_t = pi(a_t|x_t) / mu(a_t|x_t), [T, B], from the taken actions' log-probabilities
    under the learner's policy pi and the acting policy mu; no gradient flows through it.

    Args:
        target_log_probs: [T, B] log pi(a_t|x_t) (any shape, equal to the other's).
        behaviour_log_probs: [T, B] log mu(a_t|x_t).

    Returns:
        [T, B] ratios rho_t, without gradient.
    """
    return jax.lax.stop_gradient(jnp.exp(target_log_probs - behaviour_log_probs))


def vtrace(
    behaviour_log_probs: jax.Array,
    target_log_probs: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    *,
    gamma: float,
    lam: float = 1.0,
    rho_bar: float = 1.0,
) -> tuple[jax.Array, jax.Array]:
    """V-trace value targets vs [T, B] and policy-gradient advantages [T, B].

    With discount_t = gamma (1 - terminated_t), rho_t = min(rho_bar, pi/mu) and
    c_t = lam min(1, pi/mu) (0 where the episode ended at t):
        delta_t = rho_t (r_t + discount_t next_values_t - values_t)
        vs_t    = values_t + delta_t + discount_t c_t (vs_{t+1} - values_{t+1})
        A_t     = rho_t (r_t + discount_t vs'_t - values_t)
    where vs'_t = vs_{t+1}, or next_values_t at an episode end and at t = T-1 (the paper's
    pg advantage; pg rho clipped at rho_bar). Both are constants for the gradient.

    Args:
        behaviour_log_probs: [T, B] log mu(a_t|x_t) of the acting policy.
        target_log_probs: [T, B] log pi(a_t|x_t) of the learner's policy.
        rewards: [T, B] rewards.
        values: [T, B] values V(x_t).
        next_values: [T, B] values of the states reached after each step.
        terminated: bool [T, B].
        truncated: bool [T, B].
        gamma: the discount.
        lam: the trace's lambda.
        rho_bar: the clip of rho.

    Returns:
        vs: [T, B] value targets.
        pg_advantages: [T, B] policy-gradient advantages.
    """
    import rlax  # here, not at the top: it imports distrax and TFP, about 0.7 s per process

    values = jax.lax.stop_gradient(values)
    next_values = jax.lax.stop_gradient(next_values)
    rhos = importance_weights(target_log_probs, behaviour_log_probs)
    discounts = gamma * (1.0 - terminated.astype(values.dtype))
    episode_ended = jnp.logical_or(terminated, truncated)
    trace_lambda = lam * (1.0 - episode_ended.astype(values.dtype))
    # rlax takes one trajectory [T]: its values at t-1 are ours at t, its v_t our next_values
    errors = jax.vmap(rlax.vtrace, in_axes=(1, 1, 1, 1, 1, 1, None), out_axes=1)(
        values, next_values, rewards, discounts, rhos, trace_lambda, rho_bar,
    )
    vs = values + errors
    later_vs = jnp.concatenate([vs[1:], next_values[-1:]], axis=0)
    vs_next = jnp.where(episode_ended, next_values, later_vs)
    pg_advantages = jnp.minimum(rho_bar, rhos) * (rewards + discounts * vs_next - values)
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(pg_advantages)
