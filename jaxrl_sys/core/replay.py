"""On-device replay buffers: env-major rings and proportional prioritised replay.

Every data leaf is `[num_envs, capacity, ...]` (capacity per env), so a buffer splits over
devices together with its envs and an n-step sequence is index arithmetic on one env's ring.
One row (one time step of every env) is written at a time, so all rings share one write
position. All functions are pure, jittable, vmappable over seeds and usable inside
`shard_map` on a device's local env rows; they never communicate across devices.

Prioritised replay keeps one sum-tree of `priority ** alpha` per env row (node 1 is the root,
leaf `i` is node `capacity_pow2 + i`): an env is drawn in proportion to its tree's total and
then its tree is descended, which is exactly proportional sampling over all items.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.core import collectives
from jaxrl_sys.core.types import PyTree


@struct.dataclass
class ReplayState:
    """A ring per env: data leaves [num_envs, capacity, ...], write slot and fill per env."""

    data: PyTree
    position: jax.Array  # [num_envs] int32, next slot to write (equal in every row)
    size: jax.Array  # [num_envs] int32, filled slots, <= capacity


@struct.dataclass
class Index:
    """Addresses of items: env row in [0, num_envs) and ring slot in [0, capacity)."""

    env: jax.Array  # [B] int32
    time: jax.Array  # [B] int32


@struct.dataclass
class PrioritizedState:
    """A replay ring plus one sum-tree of priority**alpha per env row."""

    replay: ReplayState
    tree: jax.Array  # [num_envs, 2 * capacity_pow2] float32
    max_priority: jax.Array  # [num_envs] float32, priority**alpha given to new items


def _capacity(state: ReplayState) -> int:
    return jax.tree.leaves(state.data)[0].shape[1]


def _gather(state: ReplayState, env: jax.Array, time: jax.Array) -> PyTree:
    """The items at (env, time), broadcast together; only those items are read."""
    return jax.tree.map(lambda leaf: leaf[env, time], state.data)


# ----------------------------------------------------------------------------- uniform


def init(example: PyTree, num_envs: int, capacity: int) -> ReplayState:
    """An empty zero-filled buffer for `capacity` items per env shaped like `example`.

    Args:
        example: one env's item, leaves without a batch axis (their shapes and dtypes are kept).
        num_envs: the number of env rows.
        capacity: items per env.

    Returns:
        The buffer: data leaves [num_envs, capacity, ...], position and size [num_envs] zeros.
    """
    if num_envs < 1 or capacity < 1:
        raise ValueError(f"num_envs and capacity must be >= 1, got {num_envs}, {capacity}")
    data = jax.tree.map(
        lambda x: jnp.zeros((num_envs, capacity) + jnp.shape(x), jnp.result_type(x)), example
    )
    # two separate arrays, so that a donated state never aliases one buffer twice
    return ReplayState(
        data=data,
        position=jnp.zeros((num_envs,), jnp.int32),
        size=jnp.zeros((num_envs,), jnp.int32),
    )


def add(state: ReplayState, step: PyTree) -> ReplayState:
    """Write one time step of every env (leaves [num_envs, ...]), overwriting the oldest.

    Args:
        state: the buffer.
        step: leaves [num_envs, ...], one item per env (cast to the stored dtypes).

    Returns:
        The buffer with the row written at `position`, which moves on by one.
    """
    capacity = _capacity(state)
    rows = jnp.arange(state.position.shape[0])
    data = jax.tree.map(
        lambda leaf, x: leaf.at[rows, state.position].set(x.astype(leaf.dtype)),
        state.data,
        step,
    )
    return ReplayState(
        data=data,
        position=(state.position + 1) % capacity,
        size=jnp.minimum(state.size + 1, capacity),
    )


def _sample_index(state: ReplayState, key: jax.Array, batch_size: int) -> Index:
    """Uniform over the filled items of all envs (flat draw, then env by cumulative size)."""
    ends = jnp.cumsum(state.size)
    flat = jax.random.randint(key, (batch_size,), 0, ends[-1], dtype=jnp.int32)
    env = jnp.searchsorted(ends, flat, side="right").astype(jnp.int32)
    time = flat - (ends[env] - state.size[env])
    return Index(env=env, time=time.astype(jnp.int32))


def sample(state: ReplayState, key: jax.Array, batch_size: int) -> tuple[PyTree, Index]:
    """A uniform batch (leaves [batch_size, ...]) of filled items and where they came from.

    The buffer must hold at least one item.

    Args:
        state: the buffer.
        key: a PRNG key.
        batch_size: the batch size B.

    Returns:
        items: leaves [B, ...].
        index: their env rows and slots, each [B].
    """
    index = _sample_index(state, key, batch_size)
    return _gather(state, index.env, index.time), index


def gather_sequences(
    state: ReplayState, index: Index, length: int
) -> tuple[PyTree, jax.Array]:
    """`length` consecutive items of each start's env ring (wrapping), and which are valid.

    Returns leaves [B, length, ...] and valid [B, length]: False from the first step newer
    than the newest written item (and everywhere for an unfilled start), so a caller can
    truncate an n-step return there. Episode ends are the caller's (via stored flags).

    Args:
        state: the buffer.
        index: the starts: env rows and slots, each [B].
        length: the sequence length L.

    Returns:
        items: leaves [B, L, ...].
        valid: bool [B, L].
    """
    capacity = _capacity(state)
    offsets = jnp.arange(length, dtype=jnp.int32)
    times = (index.time[:, None] + offsets) % capacity
    items = _gather(state, index.env[:, None], times)
    position = state.position[index.env]
    # items from the start up to and including the newest one (position - 1)
    available = (position - index.time - 1) % capacity + 1
    filled = index.time < state.size[index.env]
    valid = (offsets[None, :] < available[:, None]) & filled[:, None]
    return items, valid


def sample_sequences(
    state: ReplayState, key: jax.Array, batch_size: int, length: int
) -> tuple[PyTree, jax.Array, Index]:
    """Uniform starts over filled items, each extended to `length` steps (see gather_sequences).

    Args:
        state: the buffer.
        key: a PRNG key.
        batch_size: the batch size B.
        length: the sequence length L.

    Returns:
        items: leaves [B, L, ...].
        valid: bool [B, L].
        index: the starts: env rows and slots, each [B].
    """
    index = _sample_index(state, key, batch_size)
    items, valid = gather_sequences(state, index, length)
    return items, valid, index


# ------------------------------------------------------------------------- prioritised


def _tree_leaves_offset(tree: jax.Array) -> int:
    return tree.shape[-1] // 2


def _children(tree: jax.Array, env: jax.Array, node: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Values of nodes 2*node and 2*node+1 of each env's tree, read as one 2-wide slice each."""
    flat = tree.reshape(-1)
    start = env * tree.shape[-1] + 2 * node
    pairs = jax.vmap(lambda i: jax.lax.dynamic_slice(flat, (i,), (2,)))(start)
    return pairs[:, 0], pairs[:, 1]


def _set_leaves(tree: jax.Array, env: jax.Array, slot: jax.Array, values: jax.Array) -> jax.Array:
    """Store leaf values and recompute their ancestors level by level from their children.

    Recomputing (not adding deltas) keeps every parent equal to the sum of its children even
    when several entries share a leaf or an ancestor: they all write the same sum.
    """
    offset = _tree_leaves_offset(tree)
    nodes = offset + slot
    tree = tree.at[env, nodes].set(values)
    for _ in range(offset.bit_length() - 1):  # log2(capacity_pow2) levels
        nodes = nodes // 2
        left, right = _children(tree, env, nodes)
        tree = tree.at[env, nodes].set(left + right)
    return tree


def _tree_from_leaves(leaves: jax.Array) -> jax.Array:
    """Sum-trees [num_envs, 2 * capacity_pow2] over leaves [num_envs, capacity_pow2]."""
    levels = [leaves]
    while levels[-1].shape[-1] > 1:
        below = levels[-1]
        levels.append(below[:, 0::2] + below[:, 1::2])
    unused = jnp.zeros(leaves.shape[:-1] + (1,), leaves.dtype)
    return jnp.concatenate([unused] + levels[::-1], axis=-1)


def init_prioritized(example: PyTree, num_envs: int, capacity: int) -> PrioritizedState:
    """An empty prioritised buffer: all leaves 0 (never drawn), max_priority 1.

    Args:
        example: one env's item, leaves without a batch axis (their shapes and dtypes are kept).
        num_envs: the number of env rows.
        capacity: items per env.

    Returns:
        The buffer: the ring of `init`, trees [num_envs, 2 * capacity_pow2] (capacity_pow2 the power
            of two >= capacity) and max_priority [num_envs].
    """
    capacity_pow2 = 1 << (capacity - 1).bit_length()
    return PrioritizedState(
        replay=init(example, num_envs, capacity),
        tree=jnp.zeros((num_envs, 2 * capacity_pow2), jnp.float32),
        max_priority=jnp.ones((num_envs,), jnp.float32),
    )


def add_prioritized(state: PrioritizedState, step: PyTree) -> PrioritizedState:
    """Write one time step of every env; the new items get max_priority.

    Args:
        state: the buffer.
        step: leaves [num_envs, ...], one item per env.

    Returns:
        The buffer with the row written.
    """
    env = jnp.arange(state.tree.shape[0])
    tree = _set_leaves(state.tree, env, state.replay.position, state.max_priority)
    return state.replace(replay=add(state.replay, step), tree=tree)


def _descend(
    tree: jax.Array, env: jax.Array, mass: jax.Array, total: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Leaf slot (and its value) of each env's tree where the running sum passes `mass`.

    `total` is each env's root value. A child with zero mass is never entered (guards float
    rounding), so empty slots are never returned while the env's total is positive.
    """
    offset = _tree_leaves_offset(tree)
    node = jnp.ones_like(env)
    value = total
    for _ in range(offset.bit_length() - 1):
        left, right = _children(tree, env, node)
        go_right = jnp.where((left > 0) & (right > 0), mass >= left, right > 0)
        mass = jnp.where(go_right, mass - left, mass)
        value = jnp.where(go_right, right, left)
        node = 2 * node + go_right.astype(node.dtype)
    return (node - offset).astype(jnp.int32), value


def global_segment_draws(key: jax.Array, batch_size: int, axis_name: Optional[str]
                         ) -> jax.Array:
    """This device's `batch_size` uniform draws [B], its slice of one draw for the whole
    batch over the device axis (`key` the same on every device).

    With them, a sharded `sample_prioritized` picks what one device holding every env would
    pick wherever the devices' shares of the priority mass are equal (uniform priorities over
    equally filled envs), so a run does not depend on how its envs are split over devices.

    Args:
        key: a PRNG key, the same on every device.
        batch_size: this device's batch size B.
        axis_name: the device axis, or None.

    Returns:
        [B] float32 draws in [0, 1).
    """
    devices = collectives.axis_size(axis_name)
    draws = jax.random.uniform(key, (batch_size * devices,))
    return jax.lax.dynamic_slice_in_dim(draws, collectives.axis_index(axis_name) * batch_size,
                                        batch_size)


def sample_prioritized(
    state: PrioritizedState, key: jax.Array, batch_size: int, beta: float,
    axis_name: Optional[str] = None, draws: Optional[jax.Array] = None,
) -> tuple[PyTree, Index, jax.Array]:
    """A stratified proportional batch, its index, and importance weights (batch max = 1).

    The total mass is cut into batch_size equal segments with one uniform draw in each (from
    `key`, or `draws` [B] where given); an item's weight is (N * P(i)) ** -beta / max over
    the batch, N the number of filled items. The buffer must hold at least one item with
    positive priority. Sharded over the device axis `axis_name` (each device samples its
    share of the batch from its own shard), the max is the whole batch's, so the weights are
    those of one device sampling it all.

    Args:
        state: the buffer.
        key: a PRNG key (unused where `draws` is given).
        batch_size: this device's batch size B.
        beta: the importance-weight exponent.
        axis_name: the device axis the batch is sharded over, or None.
        draws: [B] uniform draws in [0, 1) (`global_segment_draws`), or None to draw from `key`.

    Returns:
        items: leaves [B, ...].
        index: their env rows and slots, each [B].
        weights: [B] float32 importance weights.
    """
    totals = state.tree[:, 1]
    ends = jnp.cumsum(totals)
    grand = ends[-1]
    starts = ends - totals
    if draws is None:
        draws = jax.random.uniform(key, (batch_size,))
    u = (jnp.arange(batch_size) + draws) * (grand / batch_size)
    u = jnp.minimum(u, jnp.nextafter(grand, jnp.float32(0)))  # stay inside the last env
    env = jnp.searchsorted(ends, u, side="right").astype(jnp.int32)
    env = jnp.minimum(env, totals.shape[0] - 1)
    time, leaf = _descend(state.tree, env, jnp.maximum(u - starts[env], 0.0), totals[env])
    probs = leaf / grand
    filled = jnp.sum(state.replay.size).astype(jnp.float32)
    weights = (filled * probs) ** -beta
    weights = weights / collectives.pmax(jnp.max(weights), axis_name)
    index = Index(env=env, time=time)
    return _gather(state.replay, env, time), index, weights


def update_priorities(
    state: PrioritizedState,
    index: Index,
    priorities: jax.Array,
    alpha: float,
    eps: float = 1e-6,
) -> PrioritizedState:
    """Store (|p| + eps) ** alpha for the indexed items and raise max_priority.

    Where an item appears several times in `index`, its last occurrence wins. Unfilled
    slots are left at 0, so they stay unsampleable. max_priority stays equal over the
    (local) env rows; it is not shared across devices.

    Args:
        state: the buffer.
        index: the items' env rows and slots, each [B].
        priorities: [B] new priorities (e.g. absolute TD errors).
        alpha: the priority exponent.
        eps: added to |p|, so that no filled item gets priority 0.

    Returns:
        The buffer with the new priorities.
    """
    values = (jnp.abs(priorities).astype(jnp.float32) + eps) ** alpha
    filled = index.time < state.replay.size[index.env]
    values = jnp.where(filled, values, 0.0)
    # resolve duplicates deterministically: every copy writes its last occurrence's value
    flat = index.env * _capacity(state.replay) + index.time
    order = jnp.argsort(flat, stable=True)
    sorted_flat = flat[order]
    last = jnp.searchsorted(sorted_flat, sorted_flat, side="right") - 1
    stored = values[order][last]
    tree = _set_leaves(state.tree, index.env[order], index.time[order], stored)
    top = jnp.maximum(jnp.max(state.max_priority), jnp.max(stored))
    return state.replace(tree=tree, max_priority=jnp.full_like(state.max_priority, top))


@struct.dataclass
class SequenceBatch:
    """Sampled sequences of stored steps [B, L, ...], which steps belong to the sampled
    episode [B, L], and importance weights [B] (ones without prioritisation). Agents that
    store more per step (MuZero's search policy) subclass it."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array
    valid: jax.Array
    weights: jax.Array

    @classmethod
    def from_rows(cls, data: dict, valid: jax.Array, weights: jax.Array) -> SequenceBatch:
        """The batch of gathered `data` (a dict with a key per field).

        Args:
            data: field name -> leaves [B, L, ...] (`gather_sequences`' items); other keys are
                ignored.
            valid: bool [B, L].
            weights: [B] importance weights.

        Returns:
            The batch (of the class it is called on).
        """
        names = [f.name for f in dataclasses.fields(cls) if f.name not in ("valid", "weights")]
        return cls(**{name: data[name] for name in names}, valid=valid, weights=weights)
