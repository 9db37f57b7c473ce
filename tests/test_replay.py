"""Replay buffers against a plain reference (the chronological list of rows each env received)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from jaxrl_sys.core import replay
from jaxrl_sys.runtime.execution import DEVICE_AXIS, make_mesh

EXAMPLE = {
    "obs": jnp.zeros((3,), jnp.float32),
    "action": jnp.zeros((), jnp.int32),
    "done": jnp.zeros((), jnp.bool_),
}

add = jax.jit(replay.add)
sample = jax.jit(replay.sample, static_argnums=2)
gather_sequences = jax.jit(replay.gather_sequences, static_argnums=2)
sample_sequences = jax.jit(replay.sample_sequences, static_argnums=(2, 3))
add_prioritized = jax.jit(replay.add_prioritized)
sample_prioritized = jax.jit(replay.sample_prioritized, static_argnums=2)
update_priorities = jax.jit(replay.update_priorities)
sample_prioritized_many = jax.jit(
    jax.vmap(replay.sample_prioritized, in_axes=(None, 0, None, None)), static_argnums=2
)


def make_rows(rng, num_rows, num_envs):
    """Rows [num_rows, num_envs, ...] whose items name themselves: obs = (env, t, noise)."""
    t, env = np.meshgrid(np.arange(num_rows), np.arange(num_envs), indexing="ij")
    obs = np.stack([env, t, rng.normal(size=t.shape)], axis=-1).astype(np.float32)
    return {
        "obs": obs,
        "action": (1000 * t + env).astype(np.int32),
        "done": rng.random(t.shape) < 0.3,
    }


def row(rows, t):
    return jax.tree.map(lambda x: x[t], rows)


def filled(num_envs, capacity, num_rows, seed, prioritized=False):
    """A buffer after `num_rows` adds, and the rows added (the reference)."""
    rows = make_rows(np.random.default_rng(seed), num_rows, num_envs)
    if prioritized:
        state = replay.init_prioritized(EXAMPLE, num_envs, capacity)
        for t in range(num_rows):
            state = add_prioritized(state, row(rows, t))
    else:
        state = replay.init(EXAMPLE, num_envs, capacity)
        for t in range(num_rows):
            state = add(state, row(rows, t))
    return state, rows


def index_of(env, time):
    return replay.Index(
        env=jnp.asarray(np.ravel(env), jnp.int32), time=jnp.asarray(np.ravel(time), jnp.int32)
    )


def stored_slot(t, capacity):
    return t % capacity


def expected_item(rows, env, t):
    return {k: v[t, env] for k, v in rows.items()}


def assert_items_equal(got, want):
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=k)


def check_tree(tree):
    """Every internal node equals the float32 sum of its children (recomputed, so exactly)."""
    tree = np.asarray(tree)
    half = tree.shape[1] // 2
    for node in range(1, half):
        np.testing.assert_array_equal(tree[:, node], tree[:, 2 * node] + tree[:, 2 * node + 1])
    np.testing.assert_allclose(tree[:, 1], tree[:, half:].sum(axis=1), rtol=1e-5)


# ----------------------------------------------------------------------------- uniform


@pytest.mark.parametrize(
    "num_envs,capacity,num_rows", [(1, 1, 3), (3, 5, 4), (3, 5, 5), (2, 7, 16), (4, 4, 11)]
)
def test_ring_overwrites_oldest_in_order(num_envs, capacity, num_rows):
    state, rows = filled(num_envs, capacity, num_rows, seed=num_rows)
    np.testing.assert_array_equal(state.position, np.full(num_envs, num_rows % capacity))
    np.testing.assert_array_equal(state.size, np.full(num_envs, min(num_rows, capacity)))
    data = jax.tree.map(np.asarray, state.data)
    written = set()
    for t in range(max(0, num_rows - capacity), num_rows):  # the last `capacity` rows
        slot = stored_slot(t, capacity)
        written.add(slot)
        assert_items_equal({k: v[:, slot] for k, v in data.items()}, row(rows, t))
    for slot in set(range(capacity)) - written:  # never written: still zero
        for v in data.values():
            assert not v[:, slot].any()


def test_init_state_can_be_donated():
    state = replay.init(EXAMPLE, 2, 3)
    step = jax.jit(replay.add, donate_argnums=0)
    state = step(state, row(make_rows(np.random.default_rng(0), 1, 2), 0))
    pstate = replay.init_prioritized(EXAMPLE, 2, 3)
    one_row = row(make_rows(np.random.default_rng(0), 1, 2), 0)
    pstate = jax.jit(replay.add_prioritized, donate_argnums=0)(pstate, one_row)
    assert int(state.size[0]) == int(pstate.replay.size[0]) == 1


@pytest.mark.parametrize("num_rows", [5, 13])  # part-filled, wrapped
def test_sample_draws_filled_items_uniformly(num_rows):
    num_envs, capacity, draws = 3, 8, 24_000
    state, rows = filled(num_envs, capacity, num_rows, seed=1)
    batch, index = sample(state, jax.random.PRNGKey(num_rows), draws)
    env, time = np.asarray(index.env), np.asarray(index.time)
    size = min(num_rows, capacity)
    assert env.min() >= 0 and env.max() < num_envs
    assert time.min() >= 0 and time.max() < size  # never an unfilled slot
    # the batch holds the indexed items
    data = jax.tree.map(np.asarray, state.data)
    assert_items_equal(batch, {k: v[env, time] for k, v in data.items()})
    # chi-square over the num_envs * size filled items
    counts = np.zeros((num_envs, size))
    np.add.at(counts, (env, time), 1)
    expected = draws / counts.size
    chi2 = ((counts - expected) ** 2 / expected).sum()
    dof = counts.size - 1
    assert chi2 < dof + 6 * np.sqrt(2 * dof), chi2


@pytest.mark.parametrize(
    "num_envs,capacity,num_rows,length", [(2, 6, 4, 3), (3, 5, 12, 4), (2, 4, 9, 6), (1, 3, 3, 2)]
)
def test_gather_sequences_matches_reference_slices(num_envs, capacity, num_rows, length):
    state, rows = filled(num_envs, capacity, num_rows, seed=7)
    env, time = np.meshgrid(np.arange(num_envs), np.arange(capacity), indexing="ij")
    index = index_of(env, time)
    items, valid = gather_sequences(state, index, length)
    items, valid = jax.tree.map(np.asarray, items), np.asarray(valid)
    data = jax.tree.map(np.asarray, state.data)
    oldest = max(0, num_rows - capacity)
    for b, (e, slot) in enumerate(zip(env.ravel(), time.ravel())):
        held = [t for t in range(oldest, num_rows) if stored_slot(t, capacity) == slot]
        for s in range(length):
            ring_slot = (slot + s) % capacity  # content is always the ring's, wrapping
            assert_items_equal({k: v[b, s] for k, v in items.items()},
                               {k: v[e, ring_slot] for k, v in data.items()})
            if not held:  # unfilled start
                assert not valid[b, s]
                continue
            t = held[0] + s
            assert valid[b, s] == (t < num_rows), (e, slot, s)
            if t < num_rows:
                got = {k: v[b, s] for k, v in items.items()}
                assert_items_equal(got, expected_item(rows, e, t))


def test_sample_sequences_starts_are_filled_and_gathered():
    state, _ = filled(3, 6, 4, seed=3)
    items, valid, index = sample_sequences(state, jax.random.PRNGKey(0), 64, 3)
    assert np.asarray(index.time).max() < 4
    items2, valid2 = gather_sequences(state, index, 3)
    assert_items_equal(items, items2)
    np.testing.assert_array_equal(valid, valid2)
    assert np.asarray(valid)[:, 0].all()


# ------------------------------------------------------------------------- prioritised


def prioritized_with_random_priorities(num_envs, capacity, num_rows, seed, alpha):
    """A prioritised buffer whose filled items have random priorities (some exactly 0)."""
    state, rows = filled(num_envs, capacity, num_rows, seed, prioritized=True)
    rng = np.random.default_rng(seed)
    size = min(num_rows, capacity)
    env, time = np.meshgrid(np.arange(num_envs), np.arange(size), indexing="ij")
    priorities = rng.exponential(size=env.shape).astype(np.float32)
    priorities[rng.random(env.shape) < 0.2] = 0.0
    index = index_of(env, time)
    state = update_priorities(state, index, jnp.asarray(priorities.ravel()), alpha, 0.0)
    mass = np.zeros((num_envs, capacity), np.float32)
    mass[:, :size] = priorities ** np.float32(alpha)
    return state, mass


@pytest.mark.parametrize("num_rows,seed", [(7, 0), (13, 1)])  # part-filled, wrapped
def test_prioritized_frequencies_and_weights(num_rows, seed):
    num_envs, capacity, batch, batches, alpha, beta = 4, 10, 256, 80, 0.7, 0.5
    state, mass = prioritized_with_random_priorities(num_envs, capacity, num_rows, seed, alpha)
    offset = state.tree.shape[1] // 2
    leaves = np.asarray(state.tree)[:, offset:offset + capacity]
    np.testing.assert_allclose(leaves, mass, rtol=1e-6)
    check_tree(state.tree)

    keys = jax.random.split(jax.random.PRNGKey(seed), batches)
    items, index, weights = sample_prioritized_many(state, keys, batch, beta)
    env, time, weights = np.asarray(index.env), np.asarray(index.time), np.asarray(weights)

    probs = mass / mass.sum()
    assert (probs[env, time] > 0).all()  # zero-priority and unfilled items never drawn
    counts = np.zeros_like(probs)
    np.add.at(counts, (env.ravel(), time.ravel()), 1)
    n = env.size
    expected = n * probs
    sigma = np.sqrt(n * probs * (1 - probs))
    assert (np.abs(counts - expected) <= 5 * sigma + 1).all(), np.abs(counts - expected).max()

    num_filled = num_envs * min(num_rows, capacity)
    want = (num_filled * probs[env, time]) ** -beta
    want /= want.max(axis=1, keepdims=True)
    np.testing.assert_allclose(weights, want, rtol=1e-4)
    data = jax.tree.map(np.asarray, state.replay.data)
    assert_items_equal(items, {k: v[env, time] for k, v in data.items()})


def test_new_items_get_max_priority():
    state, _ = filled(3, 4, 2, seed=0, prioritized=True)
    offset = state.tree.shape[1] // 2
    np.testing.assert_array_equal(np.asarray(state.tree)[:, offset:offset + 4], [[1, 1, 0, 0]] * 3)
    index = replay.Index(env=jnp.array([1], jnp.int32), time=jnp.array([0], jnp.int32))
    state = update_priorities(state, index, jnp.array([-3.0]), 0.5, 0.0)  # |p| is used
    np.testing.assert_allclose(state.max_priority, np.full(3, np.sqrt(3.0)), rtol=1e-6)
    state = add_prioritized(state, row(make_rows(np.random.default_rng(0), 1, 3), 0))
    new_leaves = np.asarray(state.tree)[:, offset + 2]
    np.testing.assert_allclose(new_leaves, np.full(3, np.sqrt(3.0)), rtol=1e-6)
    check_tree(state.tree)


def test_update_priorities_with_duplicates_keeps_last_and_sums():
    num_envs, capacity = 2, 5
    state, _ = filled(num_envs, capacity, 5, seed=0, prioritized=True)
    env = jnp.array([0, 1, 0, 0, 1, 1], jnp.int32)
    time = jnp.array([2, 4, 2, 3, 4, 0], jnp.int32)
    priorities = jnp.array([5.0, 1.0, 2.0, 0.5, 3.0, 4.0])
    state = update_priorities(state, replay.Index(env, time), priorities, 1.0, 0.0)
    leaves = np.asarray(state.tree)[:, state.tree.shape[1] // 2:][:, :capacity]
    np.testing.assert_array_equal(leaves, [[1, 1, 2, 0.5, 1], [4, 1, 1, 1, 3]])
    check_tree(state.tree)
    np.testing.assert_array_equal(state.max_priority, [4.0, 4.0])


def test_tree_sums_hold_after_random_updates_and_adds():
    rng = np.random.default_rng(0)
    num_envs, capacity = 3, 11  # capacity_pow2 = 16: five leaves per row stay empty
    state, _ = filled(num_envs, capacity, 4, seed=0, prioritized=True)
    rows = make_rows(rng, 20, num_envs)
    for step in range(20):
        state = add_prioritized(state, row(rows, step))
        size = int(state.replay.size[0])
        index = replay.Index(
            env=jnp.asarray(rng.integers(0, num_envs, 8), jnp.int32),
            time=jnp.asarray(rng.integers(0, size, 8), jnp.int32),  # duplicates likely
        )
        state = update_priorities(state, index, jnp.asarray(rng.normal(size=8), jnp.float32), 0.6)
        check_tree(state.tree)
        leaves = np.asarray(state.tree)[:, state.tree.shape[1] // 2:]
        assert not leaves[:, size:].any()  # empty slots keep priority 0
        assert (leaves[:, :size] > 0).all()


def test_descent_at_the_total_mass_never_reaches_an_empty_leaf():
    # float rounding can push a draw onto the upper edge of an env's mass
    leaves = jnp.array([[1.0, 0.5, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0]])
    tree = replay._tree_from_leaves(leaves)
    mass = jnp.array([0.0, 1.0, 1.5, 3.5, 3.6])
    slot, value = replay._descend(tree, jnp.zeros(5, jnp.int32), mass, tree[0, 1] + jnp.zeros(5))
    np.testing.assert_array_equal(slot, [0, 1, 4, 4, 4])
    np.testing.assert_array_equal(value, [1.0, 0.5, 2.0, 2.0, 2.0])


def test_update_of_unfilled_slot_is_ignored():
    state, _ = filled(2, 6, 3, seed=0, prioritized=True)
    index = replay.Index(env=jnp.array([0, 1], jnp.int32), time=jnp.array([4, 1], jnp.int32))
    state = update_priorities(state, index, jnp.array([9.0, 2.0]), 1.0, 0.0)
    leaves = np.asarray(state.tree)[:, state.tree.shape[1] // 2:]
    np.testing.assert_array_equal(leaves[:, :6], [[1, 1, 1, 0, 0, 0], [1, 2, 1, 0, 0, 0]])
    _, index, _ = sample_prioritized(state, jax.random.PRNGKey(0), 512, 0.4)
    assert np.asarray(index.time).max() < 3


# ------------------------------------------------------------------ seeds and devices


def all_ops(ustate, pstate, steps, key, batch=8, length=3):
    """Adds `steps` ([T, num_envs, ...]) to both buffers, then samples and updates."""
    k1, k2, k3 = jax.random.split(key, 3)
    for t in range(jax.tree.leaves(steps)[0].shape[0]):
        ustate = replay.add(ustate, row(steps, t))
        pstate = replay.add_prioritized(pstate, row(steps, t))
    ubatch, uindex = replay.sample(ustate, k1, batch)
    seq, valid, sindex = replay.sample_sequences(ustate, k2, batch, length)
    pbatch, pindex, weights = replay.sample_prioritized(pstate, k3, batch, 0.4)
    pstate = replay.update_priorities(pstate, pindex, pbatch["obs"][:, 2], 0.6)
    pbatch2, pindex2, weights2 = replay.sample_prioritized(pstate, k1, batch, 0.4)
    return ustate, pstate, (ubatch, uindex, seq, valid, sindex, pbatch, pindex, weights,
                            pbatch2, pindex2, weights2)


# one local shape (2 envs x 6 slots, 3 new rows) for both tests below: compiled once
LOCAL_ENVS, LOCAL_CAPACITY, NEW_ROWS = 2, 6, 3
all_ops_jit = jax.jit(all_ops)


def assert_trees_equal(a, b):
    """Integers, flags and indices exactly; floats to a few ulps (vmapped pow may round apart)."""

    def check(x, y):
        x, y = np.asarray(x), np.asarray(y)
        if np.issubdtype(x.dtype, np.floating):
            np.testing.assert_allclose(x, y, rtol=1e-6)
        else:
            np.testing.assert_array_equal(x, y)

    jax.tree.map(check, a, b)


@pytest.mark.slow
def test_vmap_over_seeds_equals_per_seed_calls():
    num_envs, capacity, seeds = LOCAL_ENVS, LOCAL_CAPACITY, 3
    per_seed = []
    for seed in range(seeds):
        ustate, _ = filled(num_envs, capacity, 1 + 3 * seed, seed)  # different fill per seed
        pstate, _ = filled(num_envs, capacity, 1 + 3 * seed, seed, prioritized=True)
        steps = make_rows(np.random.default_rng(10 + seed), NEW_ROWS, num_envs)
        per_seed.append((ustate, pstate, steps, jax.random.PRNGKey(seed)))
    stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *per_seed)
    batched = jax.jit(jax.vmap(all_ops))(*stacked)
    for seed in range(seeds):
        assert_trees_equal(jax.tree.map(lambda x: x[seed], batched), all_ops_jit(*per_seed[seed]))


@pytest.mark.slow
def test_shard_map_each_device_uses_only_its_rows():
    devices, local_envs, capacity = 8, LOCAL_ENVS, LOCAL_CAPACITY
    num_envs = devices * local_envs
    ustate, _ = filled(num_envs, capacity, 5, seed=0)
    pstate, _ = filled(num_envs, capacity, 5, seed=0, prioritized=True)
    steps = make_rows(np.random.default_rng(1), NEW_ROWS, num_envs)
    key = jax.random.PRNGKey(42)

    def body(u, p, s, k):
        return all_ops(u, p, s, jax.random.fold_in(k, jax.lax.axis_index(DEVICE_AXIS)))

    rows_spec = P(DEVICE_AXIS)
    sharded = jax.jit(jax.shard_map(
        body,
        mesh=make_mesh(devices),
        in_specs=(rows_spec, rows_spec, P(None, DEVICE_AXIS), P()),
        out_specs=rows_spec,
        check_vma=False,
    ))
    u_out, p_out, samples = sharded(ustate, pstate, steps, key)

    for d in range(devices):
        rows = slice(d * local_envs, (d + 1) * local_envs)
        local = all_ops_jit(
            jax.tree.map(lambda x: x[rows], ustate),
            jax.tree.map(lambda x: x[rows], pstate),
            jax.tree.map(lambda x: x[:, rows], steps),
            jax.random.fold_in(key, d),
        )
        got_states = jax.tree.map(lambda x: x[rows], (u_out, p_out))
        batch = len(np.asarray(local[2][1].env))
        got_samples = jax.tree.map(lambda x: x[d * batch:(d + 1) * batch], samples)
        assert_trees_equal(got_states, local[:2])
        assert_trees_equal(got_samples, local[2])


def test_sharded_prioritized_weights_share_the_whole_batchs_maximum():
    """Each device samples its share of the batch from its own rows, and the importance
    weights are divided by the maximum over every device's samples, as when one device draws
    the whole batch (a per-device maximum would scale each device's gradient its own way)."""
    devices, num_envs, rows, batch = 2, 2 * LOCAL_ENVS, 5, 16
    state, _ = filled(num_envs, LOCAL_CAPACITY, rows, seed=0, prioritized=True)
    env = jnp.repeat(jnp.arange(num_envs), rows).astype(jnp.int32)
    time = jnp.tile(jnp.arange(rows), num_envs).astype(jnp.int32)
    # device 0's items all alike, device 1's spread 1:10: their batches' maxima differ
    priorities = jnp.where(env >= LOCAL_ENVS, 1.0 + 9.0 * (jnp.arange(env.size) % 2), 1.0)
    state = update_priorities(state, replay.Index(env=env, time=time), priorities, 1.0)
    key = jax.random.PRNGKey(3)

    def body(shard, k):
        k = jax.random.fold_in(k, jax.lax.axis_index(DEVICE_AXIS))
        return replay.sample_prioritized(shard, k, batch // devices, 0.4, DEVICE_AXIS)[2]

    weights = np.asarray(jax.jit(jax.shard_map(
        body, mesh=make_mesh(devices), in_specs=(P(DEVICE_AXIS), P()),
        out_specs=P(DEVICE_AXIS), check_vma=False))(state, key))
    assert weights.max() == pytest.approx(1.0)
    scales = []
    for d in range(devices):
        shard = jax.tree.map(lambda x: x[d * LOCAL_ENVS:(d + 1) * LOCAL_ENVS], state)
        local = np.asarray(sample_prioritized(shard, jax.random.fold_in(key, d),
                                              batch // devices, 0.4)[2])  # its own max = 1
        share = weights[d * batch // devices:(d + 1) * batch // devices]
        np.testing.assert_allclose(share / local, (share / local)[0], rtol=1e-5)
        scales.append((share / local)[0])
    assert max(scales) == pytest.approx(1.0) and min(scales) < 0.9, scales
