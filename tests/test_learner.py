"""The off-policy warm-up gate (`jaxrl_sys.core.learner.when_ready`)."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.learner import when_ready


def _gate(ready: bool) -> tuple[float, int, float, int]:
    """(state, buffer, loss, learner runs) after `when_ready` on a learner that adds the key's
    sum to the state, bumps the buffer, and counts its own runs through a host callback."""
    calls: list = []

    def learn(state, buffer, key):
        jax.debug.callback(lambda: calls.append(1))
        return state + key.sum(), buffer + 1, {"loss": state * 2.0}

    state, buffer, metrics = jax.jit(
        lambda r: when_ready(r, learn, jnp.float32(3.0), jnp.int32(5), jnp.ones(2, jnp.float32))
    )(jnp.bool_(ready))
    jax.effects_barrier()
    return float(state), int(buffer), float(metrics["loss"]), len(calls)


def test_warm_up_skips_the_learner_and_gives_nan_metrics():
    state, buffer, loss, runs = _gate(False)
    assert (state, buffer, runs) == (3.0, 5, 0)  # unchanged, and the learner did not run
    assert np.isnan(loss)


def test_ready_gives_the_learner_step():
    assert _gate(True) == (5.0, 6, 6.0, 1)


def test_the_exact_linear_schedule_hits_both_ends_under_jit():
    import jax
    import numpy as np

    from jaxrl_sys.core.learner import exact_linear_schedule

    schedule = jax.jit(exact_linear_schedule(3e-3, 3e-3 * 0.1, 4656))
    assert float(schedule(0)) == np.float32(3e-3)
    assert float(schedule(4656)) == np.float32(3e-4) == float(schedule(10**6))
    assert abs(float(schedule(2328)) - 1.65e-3) < 1e-9
