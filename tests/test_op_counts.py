"""The loop-body op counter (`tools.op_counts`) on small programs whose loops are known."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from jaxrl_sys.tools import op_counts


def nested(x):
    """An outer scan of 5 steps holding an inner scan of 3 and a cond."""
    def outer(c, _):
        def inner(d, _):
            return jnp.tanh(d @ d) + 1.0, d.sum()
        d, s = jax.lax.scan(inner, c, None, length=3)  # the inner loop
        d = jax.lax.cond(d.sum() > 0, lambda d: jnp.sin(d) @ d, lambda d: d, d)
        return d * 2, s
    return jax.lax.scan(outer, x, None, length=5)  # the outer loop


def test_loops_are_found_with_their_trip_counts_depths_and_sources():
    text = jax.jit(nested).lower(jnp.ones((4, 4))).compile().as_text()
    loops = op_counts.loop_bodies(text)
    assert [(loop.depth, loop.trip_count) for loop in loops] == [(0, 5), (1, 3)]
    outer, inner = loops
    assert "test_op_counts.py:" in outer.source and "test_op_counts.py:" in inner.source
    assert "nested" in outer.source and "outer" in inner.source
    # the inner body: a dot, a fusion or more; the outer one counts the inner loop as one op,
    # the cond's costlier branch (a sin and a dot) and its own work, so it holds more ops
    assert inner.ops >= 2 and inner.fusions >= 1
    assert outer.ops > inner.ops
    assert outer.collectives == inner.collectives == 0


def test_collectives_inside_a_loop_are_counted():
    mesh = jax.make_mesh((2,), ("d",))

    def summed(x):
        def step(c, _):
            return c + jax.lax.psum(c, "d"), None
        return jax.lax.scan(step, x, None, length=4)[0]

    program = jax.jit(jax.shard_map(summed, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    x = jax.device_put(jnp.ones((2, 3)), NamedSharding(mesh, P("d")))
    loops = op_counts.loop_bodies(program.lower(x).compile().as_text())
    assert [(loop.trip_count, loop.collectives) for loop in loops] == [(4, 1)]


def test_a_program_without_loops_has_none():
    text = jax.jit(lambda x: jnp.sin(x) + 1).lower(jnp.ones(3)).compile().as_text()
    assert op_counts.loop_bodies(text) == []
    assert op_counts.program_ops(text) >= 1
