"""The off-policy warm-up gate (`jaxrl_sys.learner.when_ready`)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.learner import when_ready


def _counting_learn(calls: list):
    """A learner that adds the key to the state, bumps the buffer, and records each run."""
    def learn(state, buffer, key):
        jax.debug.callback(lambda: calls.append(1))
        return state + key.sum(), buffer + 1, {"loss": state * 2.0}

    return learn


def test_warm_up_leaves_state_and_buffer_and_gives_nan_metrics():
    calls: list = []
    state, buffer, metrics = jax.jit(
        lambda r: when_ready(r, _counting_learn(calls), jnp.float32(3.0), jnp.int32(5),
                             jnp.ones(2, jnp.float32)))(jnp.bool_(False))
    jax.effects_barrier()
    assert (float(state), int(buffer)) == (3.0, 5)
    assert np.isnan(metrics["loss"])
    assert calls == []  # the learner step did not run at all


def test_ready_gives_the_learner_step():
    calls: list = []
    state, buffer, metrics = jax.jit(
        lambda r: when_ready(r, _counting_learn(calls), jnp.float32(3.0), jnp.int32(5),
                             jnp.ones(2, jnp.float32)))(jnp.bool_(True))
    jax.effects_barrier()
    assert (float(state), int(buffer), float(metrics["loss"])) == (5.0, 6, 6.0)
    assert calls == [1]
