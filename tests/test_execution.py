"""The execution layer: placements give the same run, and the check_vma trap is avoided."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys import envs
from jaxrl_sys.agents import ppo
from jaxrl_sys.runtime.execution import (
    DEVICE_AXIS, PlacementError, make_mesh, place, placement_fns, strongly_typed, vmap_rows,
)

SMALL = dict(num_envs=16, rollout_steps=16, num_minibatches=2, update_epochs=2, total_steps=16 * 16 * 8)


def run_ppo(num_devices: int, seeds, iters: int = 3, **overrides):
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(ppo.default_config("CartPole-v1"), **{**SMALL, **overrides})
    agent = ppo.make(env, config)
    runner = place(
        *placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
        iters_per_chunk=iters,
    )
    carry, metrics = runner.run_chunk(runner.init(np.asarray(seeds)))
    return jax.device_get(carry.agent_state.params), jax.device_get(metrics)


def assert_trees_close(a, b, rtol=1e-5, atol=1e-7):
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol), a, b)


@pytest.mark.parametrize("variant", [{}, {"vtrace": True}, {"memory": "gru", "memory_size": 16}],
                         ids=["gae", "vtrace", "gru"])
@pytest.mark.slow
def test_eight_devices_equal_one_device_with_the_same_global_batch(variant):
    params_1, metrics_1 = run_ppo(1, [3], **variant)
    params_8, metrics_8 = run_ppo(8, [3], **variant)
    # the recurrent core projects all [T * B] inputs in one matmul: 16 rows per device against
    # 128 on one run other kernels, which round differently in the last bits (seen: 3e-7)
    assert_trees_close(params_8, params_1, atol=1e-6 if "memory" in variant else 1e-7)
    np.testing.assert_allclose(metrics_8["episode_count"], metrics_1["episode_count"])
    # Training did move the parameters (the comparison is not between two initialisations).
    params_0, _ = run_ppo(1, [3], iters=1, **variant)
    diff = jax.tree.map(lambda x, y: np.abs(x - y).max(), params_1, params_0)
    assert max(jax.tree.leaves(diff)) > 1e-3


@pytest.mark.parametrize("variant", [{}, {"memory": "lstm", "memory_size": 16}],
                         ids=["feed-forward", "lstm"])
@pytest.mark.slow
def test_vmapped_seed_equals_single_run_with_that_seed(variant):
    params_many, metrics_many = run_ppo(1, [5, 6, 7], **variant)
    params_one, metrics_one = run_ppo(1, [6], **variant)
    # A batch of 3 seeds runs other matmul kernels than a batch of 1, which round differently
    # in the last bits (seen: 2.6e-7 on an AVX-512 CPU); seeds differ by ~0.1.
    assert_trees_close(
        jax.tree.map(lambda x: x[1], params_many), jax.tree.map(lambda x: x[0], params_one),
        atol=1e-5,
    )
    np.testing.assert_allclose(metrics_many["episode_return_sum"][1], metrics_one["episode_return_sum"][0], rtol=1e-5)
    # Different seeds really are different runs.
    a, b = (jax.tree.leaves(jax.tree.map(lambda x: x[i], params_many))[0] for i in (0, 1))
    assert not np.allclose(a, b)


@pytest.mark.slow
def test_same_seed_gives_identical_metrics():
    _, first = run_ppo(2, [11])
    _, second = run_ppo(2, [11])
    for key in first:
        np.testing.assert_array_equal(first[key], second[key])


def test_envs_must_divide_over_devices():
    with pytest.raises(PlacementError, match="does not divide"):
        run_ppo(3, [0], num_envs=16)


def test_more_devices_than_exist_is_an_error():
    with pytest.raises(PlacementError, match="asked for 9 devices"):
        make_mesh(9)


@pytest.mark.parametrize("check_vma, expected_factor", [(False, 1.0), (True, 8.0)])
def test_pmean_of_a_replicated_parameter_gradient(check_vma, expected_factor):
    """Why execution.place uses check_vma=False: with True, grads come back already summed."""
    mesh = make_mesh(8)
    data = jnp.arange(16.0)

    def local_grad(w, x):
        grad = jax.grad(lambda w: jnp.mean(w * x))(w)
        return jax.lax.pmean(grad, DEVICE_AXIS)

    mapped = jax.shard_map(
        local_grad, mesh=mesh, in_specs=(P(), P(DEVICE_AXIS)), out_specs=P(), check_vma=check_vma
    )
    grad = jax.jit(mapped)(jnp.float32(1.0), data)
    np.testing.assert_allclose(grad, expected_factor * data.mean(), rtol=1e-6)


def test_one_row_runs_unbatched_with_vmaps_results():
    """`vmap_rows` gives `jax.vmap`'s results and shapes for one row or many, and runs one
    row without a batch axis (which XLA:CPU compiles faster for some programs)."""
    batched = []

    def fn(x, tree):
        batched.append(type(x).__name__ == "BatchTracer")
        return {"sum": x.sum() + tree["b"], "scaled": x * tree["b"]}

    for rows in (1, 3):
        x = jnp.arange(rows * 4, dtype=jnp.float32).reshape(rows, 4)
        tree = {"b": jnp.arange(rows, dtype=jnp.float32) + 2.0}
        got = jax.jit(vmap_rows(fn))(x, tree)
        want = jax.vmap(fn)(x, tree)
        jax.tree.map(np.testing.assert_array_equal, got, want)
    assert batched == [False, True, True, True]  # one row unbatched; then vmap_rows, vmap


def test_an_initialised_carry_has_no_weak_types_as_a_restored_one_has_none():
    """A Python counter in an env state is weakly typed; restored arrays never are. The
    placed init makes it strong (same dtype and value), so an initialised and a restored
    carry compile one chunk program, and a resumed run finds it in the compilation cache."""
    tree = jax.jit(lambda: strongly_typed({"step": jnp.asarray(3), "obs": jnp.ones(2)}))()
    assert [x.weak_type for x in jax.tree.leaves(tree)] == [False, False]
    assert int(tree["step"]) == 3 and tree["step"].dtype == jnp.int32

    def weak_init_fn(key, env_ids):
        return {"w": jnp.zeros(2)}, {"step": jax.lax.full(env_ids.shape, 0)}  # a Python 0

    assert jax.jit(lambda: weak_init_fn(None, jnp.arange(2)))()[1]["step"].weak_type
    runner = place(weak_init_fn, lambda a, e, k: (a, e, {}), num_envs=4)
    carry = runner.init(np.asarray([0]))
    assert not any(x.weak_type for x in jax.tree.leaves(carry))
