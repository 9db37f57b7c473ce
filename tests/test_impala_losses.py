"""IMPALA's targets and loss (jaxrl_sys/agents/impala/losses.py): V-trace against the paper's
sum written out in NumPy, its on-policy reduction to n-step and lambda returns, and which
inputs the loss's gradient flows through."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.agents.impala import losses
from jaxrl_sys.core.returns import gae

GAMMA = 0.9


def _trajectory(steps: int = 9, envs: int = 4, seed: int = 0, off_policy: bool = True) -> dict:
    """Random arrays [T, B]: env 0 terminates at t=3, env 1 is truncated at t=5, env 2 both
    terminates at t=1 and is truncated at t=6; rho spans both sides of 1 when `off_policy`."""
    rng = np.random.default_rng(seed)
    behaviour = rng.normal(-1.0, 0.4, (steps, envs))
    target = behaviour + (rng.normal(0.0, 0.6, (steps, envs)) if off_policy else 0.0)
    terminated = np.zeros((steps, envs), bool)
    truncated = np.zeros((steps, envs), bool)
    terminated[3, 0] = terminated[1, 2] = True
    truncated[5, 1] = truncated[6, 2] = True
    values = rng.normal(0.0, 1.0, (steps, envs))
    # the value reached is the next step's value, except where an episode ended (its final
    # observation's) and after the last step (the bootstrap value)
    next_values = rng.normal(0.0, 1.0, (steps, envs))
    ended = terminated | truncated
    next_values[:-1] = np.where(ended[:-1], next_values[:-1], values[1:])
    return dict(behaviour_log_probs=behaviour, target_log_probs=target,
                rewards=rng.normal(0.5, 1.0, (steps, envs)), values=values,
                next_values=next_values, terminated=terminated, truncated=truncated)


def _ours(data: dict, lam: float, rho_bar: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """`losses.vtrace` on float32 copies of `data`, back as float64 NumPy arrays."""
    as_jax = {k: jnp.asarray(v, jnp.float32 if v.dtype != bool else bool) for k, v in data.items()}
    vs, advantages = losses.vtrace(**as_jax, gamma=GAMMA, lam=lam, rho_bar=rho_bar)
    return np.asarray(vs, np.float64), np.asarray(advantages, np.float64)


def _reference_vtrace(data: dict, lam: float, rho_bar: float) -> tuple[np.ndarray, np.ndarray]:
    """The paper's definition in float64, one env and start step at a time:
    vs_t = V(x_t) + sum_{s=t}^{end} gamma^{s-t} (prod_{i=t}^{s-1} c_i) rho_s delta_s,
    delta_s = r_s + gamma (1 - terminated_s) V(x'_s) - V(x_s), the sum ending at the episode's
    last step or the trajectory's; pg advantage rho_t (r_t + gamma_t vs_{t+1} - V(x_t))."""
    ratio = np.exp(data["target_log_probs"] - data["behaviour_log_probs"])
    rho, c = np.minimum(rho_bar, ratio), lam * np.minimum(1.0, ratio)
    r, v, next_v = data["rewards"], data["values"], data["next_values"]
    term, ended = data["terminated"], data["terminated"] | data["truncated"]
    steps, envs = r.shape
    discount = GAMMA * (1.0 - term)
    delta = r + discount * next_v - v
    vs = np.zeros_like(v)
    for b in range(envs):
        for t in range(steps):
            total, weight = 0.0, 1.0
            for s in range(t, steps):
                total += weight * rho[s, b] * delta[s, b]
                if ended[s, b]:
                    break
                weight *= GAMMA * c[s, b]
            vs[t, b] = v[t, b] + total
    advantages = np.zeros_like(v)
    for b in range(envs):
        for t in range(steps):
            later = next_v[t, b] if ended[t, b] or t == steps - 1 else vs[t + 1, b]
            advantages[t, b] = rho[t, b] * (r[t, b] + discount[t, b] * later - v[t, b])
    return vs, advantages


@pytest.mark.parametrize("lam", [1.0, 0.8])
def test_vtrace_matches_the_papers_sum_off_policy_with_episode_ends(lam):
    data = _trajectory()
    ratio = np.exp(data["target_log_probs"] - data["behaviour_log_probs"])
    assert (ratio > 1.2).any() and (ratio < 0.8).any()  # the clipping is exercised both ways
    vs, advantages = _ours(data, lam)
    ref_vs, ref_advantages = _reference_vtrace(data, lam, rho_bar=1.0)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(advantages, ref_advantages, rtol=1e-5, atol=1e-5)
    # a terminated step's target is its clipped one-step target, with no bootstrap
    rho = min(1.0, ratio[3, 0])
    expected = data["values"][3, 0] + rho * (data["rewards"][3, 0] - data["values"][3, 0])
    np.testing.assert_allclose(vs[3, 0], expected, rtol=1e-5)


def test_rho_bar_clips_the_td_errors_and_the_advantages_but_not_the_traces():
    data = _trajectory(seed=3)
    vs, advantages = _ours(data, 1.0, rho_bar=2.0)
    ref_vs, ref_advantages = _reference_vtrace(data, 1.0, rho_bar=2.0)
    np.testing.assert_allclose(vs, ref_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(advantages, ref_advantages, rtol=1e-5, atol=1e-5)
    assert not np.allclose(vs, _ours(data, 1.0, rho_bar=1.0)[0])


def _n_step_returns(data: dict) -> np.ndarray:
    """Discounted rewards to the episode's or the trajectory's end, plus gamma^n times the
    value reached there unless the episode terminated: the on-policy lambda = 1 target."""
    r, next_v = data["rewards"], data["next_values"]
    term, ended = data["terminated"], data["terminated"] | data["truncated"]
    steps, envs = r.shape
    returns = np.zeros_like(r)
    for b in range(envs):
        for t in range(steps):
            total, scale = 0.0, 1.0
            for s in range(t, steps):
                total += scale * r[s, b]
                scale *= GAMMA
                if ended[s, b] or s == steps - 1:
                    total += 0.0 if term[s, b] else scale * next_v[s, b]
                    break
            returns[t, b] = total
    return returns


def test_on_policy_vtrace_is_the_n_step_return_and_the_lambda_return():
    data = _trajectory(seed=1, off_policy=False)
    vs, advantages = _ours(data, 1.0)
    np.testing.assert_allclose(vs, _n_step_returns(data), rtol=1e-5, atol=1e-5)
    args = [jnp.asarray(data[k], jnp.float32) for k in ("rewards", "values", "next_values")]
    flags = [jnp.asarray(data[k]) for k in ("terminated", "truncated")]
    gae_advantages, _ = gae(*args, *flags, GAMMA, 1.0)
    np.testing.assert_allclose(advantages, np.asarray(gae_advantages), rtol=1e-5, atol=1e-5)
    for lam in (0.95, 0.5):  # rho = c = 1: V-trace with traces lambda is TD(lambda)
        _, lambda_returns = gae(*args, *flags, GAMMA, lam)
        np.testing.assert_allclose(_ours(data, lam)[0], np.asarray(lambda_returns),
                                   rtol=1e-5, atol=1e-5)


def test_loss_gradients_flow_through_log_probs_and_values_only():
    """d loss / d values = vf_coef (values - vs) / N (the targets are constants) and
    d loss / d log_probs = -A / N (rho is a constant), at the entropy's own weight."""
    data = _trajectory(seed=2)
    f32 = lambda k: jnp.asarray(data[k], jnp.float32)  # noqa: E731
    entropy = jnp.full(data["rewards"].shape, 0.7, jnp.float32)
    kwargs = dict(gamma=GAMMA, lam=1.0, rho_bar=1.0, vf_coef=0.5, ent_coef=0.01)

    def loss(log_probs, values, next_values, entropy):
        return losses.impala_loss(
            log_probs, entropy, values, next_values, f32("behaviour_log_probs"), f32("rewards"),
            jnp.asarray(data["terminated"]), jnp.asarray(data["truncated"]), **kwargs)[0]

    inputs = (f32("target_log_probs"), f32("values"), f32("next_values"), entropy)
    d_log_probs, d_values, d_next_values, d_entropy = jax.grad(loss, argnums=(0, 1, 2, 3))(*inputs)
    vs, advantages = _ours(data, 1.0)
    n = data["rewards"].size
    np.testing.assert_allclose(np.asarray(d_values), 0.5 * (data["values"] - vs) / n,
                               rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(np.asarray(d_log_probs), -advantages / n, rtol=1e-4, atol=1e-7)
    assert not np.asarray(d_next_values).any()
    np.testing.assert_allclose(np.asarray(d_entropy), -0.01 / n, rtol=1e-5)
    total, metrics = losses.impala_loss(*inputs[:1], entropy, *inputs[1:3],
                                        f32("behaviour_log_probs"), f32("rewards"),
                                        jnp.asarray(data["terminated"]),
                                        jnp.asarray(data["truncated"]), **kwargs)
    np.testing.assert_allclose(
        float(total), metrics["policy_loss"] + 0.5 * metrics["value_loss"] - 0.01 * 0.7,
        rtol=1e-5)
