"""The driver's chunk loop: how far it trains past a chunk whose result stops it."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys.runtime import driver


def _counting_runner(iters: int = 2) -> SimpleNamespace:
    """A runner whose carry counts the chunks run and whose every episode returns the chunk's
    number (the metrics `summarize` reads, [seeds, iters])."""

    @jax.jit
    def run_chunk(chunk_count):
        metrics = {"episode_count": jnp.ones((1, iters)),
                   "episode_return_sum": jnp.full((1, iters), chunk_count, jnp.float32),
                   "episode_length_sum": jnp.ones((1, iters))}
        return chunk_count + 1, metrics

    return SimpleNamespace(init=lambda seeds: jnp.zeros((), jnp.int32), run_chunk=run_chunk,
                           iters_per_chunk=iters)


@pytest.mark.parametrize("run_ahead, chunks_run", [(True, 3), (False, 2)])
def test_a_stop_trains_one_chunk_past_it_only_when_running_ahead(run_ahead, chunks_run):
    """Stopping on chunk 1's result: running ahead, chunk 2 was already dispatched (and is
    reported); judging each chunk first (a learning test stopping at its threshold), nothing
    past chunk 1 is trained."""
    stop_at_one = lambda summary, seconds: summary.chunk == 1  # noqa: E731
    result = driver.train(_counting_runner(), np.array([0]), 10, stop_at_one,
                          run_ahead=run_ahead)
    assert [summary.chunk for summary in result.history] == list(range(chunks_run))
    assert [summary.returns.tolist() for summary in result.history] == \
        [[float(chunk)] for chunk in range(chunks_run)]
    assert int(result.carry) == chunks_run
