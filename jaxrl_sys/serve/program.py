"""The served policy as one compiled function of the state leaves it reads.

A run's agent state holds more than acting needs (optimiser moments, target networks, replay).
Tracing the greedy policy once finds the leaves it reads; the server keeps those on device and
sends them to local-inference clients, which rebuild the same program from the run's record
(`policy_from_record`) and check it against the server's `Manifest`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

from jaxrl_sys.core.evaluation import stateful
from jaxrl_sys.core.types import PyTree


@dataclasses.dataclass(frozen=True)
class Manifest:
    """Every leaf of the policy's state (flattened): its shape and dtype, and which the policy
    reads; what a local-inference client checks its own rebuilt program against."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    used: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON-ready data."""
        return {"shapes": [list(s) for s in self.shapes], "dtypes": list(self.dtypes),
                "used": list(self.used)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Manifest":
        """The manifest `to_dict` wrote."""
        return cls(tuple(tuple(int(d) for d in s) for s in data["shapes"]),
                   tuple(str(d) for d in data["dtypes"]), tuple(int(i) for i in data["used"]))


def batch_sizes(max_batch: int) -> tuple[int, ...]:
    """The padded batch sizes the program is compiled for: powers of two below `max_batch`,
    and `max_batch` itself (so a batch never compiles a new program)."""
    sizes, size = [], 1
    while size < max_batch:
        sizes.append(size)
        size *= 2
    return tuple(sizes) + (max_batch,)


def read_leaves(template: PyTree, policy_step: Callable[..., Any], obs_shape: Sequence[int],
                obs_dtype: str, memory: PyTree) -> tuple[int, ...]:
    """Indices of the flattened `template`'s leaves that `policy_step(state, memory, obs,
    starts, key)` reads, found by tracing it on one observation.

    Args:
        template: the policy's state (arrays or `jax.ShapeDtypeStruct`s).
        policy_step: the policy, as `RecurrentPolicy.step`.
        obs_shape: one observation's shape.
        obs_dtype: the observations' dtype.
        memory: the memory of one row (`initial(1)`), or None.

    Returns:
        The indices, ascending.
    """
    leaves, treedef = jax.tree.flatten(template)
    shapes = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]

    def act(state_leaves):
        return policy_step(jax.tree.unflatten(treedef, state_leaves), memory,
                           jnp.zeros((1, *obs_shape), obs_dtype), jnp.ones(1, bool),
                           jax.random.PRNGKey(0))

    jaxpr = jax.make_jaxpr(act)(shapes).jaxpr
    read = {id(v) for eqn in jaxpr.eqns for v in eqn.invars if isinstance(v, jax_core.Var)}
    read |= {id(v) for v in jaxpr.outvars if isinstance(v, jax_core.Var)}
    return tuple(i for i, v in enumerate(jaxpr.invars[:len(leaves)]) if id(v) in read)


class PolicyProgram:
    """`act(leaves, memory, obs, starts, key) -> (actions, memory)` compiled once per padded
    batch size, over only the leaves the policy reads (the others are zeros XLA removes).

    Args:
        policy: the agent's greedy policy (`greedy_action`): a function or a RecurrentPolicy.
        template: the policy's whole state (arrays or `jax.ShapeDtypeStruct`s).
        obs_shape: one observation's shape; obs_dtype: its dtype.
        max_batch: the largest batch one call takes.
        used: the leaves the policy reads, where already known (a client takes the server's).
    """

    def __init__(self, policy: Any, template: PyTree, obs_shape: Sequence[int], obs_dtype: str,
                 max_batch: int, used: Optional[Sequence[int]] = None):
        self.policy = stateful(policy)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.obs_dtype = np.dtype(obs_dtype)
        self.sizes = batch_sizes(max_batch)
        leaves, self._treedef = jax.tree.flatten(template)
        shapes = tuple(tuple(np.shape(x)) for x in leaves)
        dtypes = tuple(str(np.dtype(x.dtype)) for x in leaves)
        self.row_memory = self.policy.initial(1)
        if used is None:
            used = read_leaves(template, self.policy.step, self.obs_shape, str(self.obs_dtype),
                               self.row_memory)
        self.manifest = Manifest(shapes, dtypes, tuple(used))
        self._act = jax.jit(self._act_on_leaves)

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries memory from step to step."""
        return self.row_memory is not None

    def leaves_of(self, state: PyTree) -> list[jax.Array]:
        """The leaves of a whole policy state that `act` takes, in order."""
        leaves = jax.tree.leaves(state)
        return [jnp.asarray(leaves[i]) for i in self.manifest.used]

    def _act_on_leaves(self, used_leaves, memory, obs, starts, key):
        """The policy's step on a state rebuilt from the leaves it reads."""
        state_leaves = [jnp.zeros(s, d) for s, d in zip(self.manifest.shapes, self.manifest.dtypes)]
        for i, leaf in zip(self.manifest.used, used_leaves):
            state_leaves[i] = leaf
        state = jax.tree.unflatten(self._treedef, state_leaves)
        return self.policy.step(state, memory, obs, starts, key)

    def padded_size(self, batch: int) -> int:
        """The compiled batch size that a batch of `batch` rows is padded to."""
        for size in self.sizes:
            if size >= batch:
                return size
        raise ValueError(f"a batch of {batch} rows exceeds the largest, {self.sizes[-1]}")

    def act(self, leaves: Sequence[jax.Array], obs: np.ndarray, starts: np.ndarray,
            memory_rows: Sequence[PyTree], key: jax.Array) -> tuple[np.ndarray, list[PyTree]]:
        """Actions for observations [B, ...] (padded to a compiled size), and each row's memory
        after the step.

        Args:
            leaves: the used leaves (`leaves_of`).
            obs: observations [B, ...]; starts: bool [B], the rows that begin an episode.
            memory_rows: each row's memory before the step (`row_memory` shape), or Nones.
            key: the batch's randomness.

        Returns:
            Actions [B, ...] as numpy, and the B rows' memory after the step.
        """
        batch = obs.shape[0]
        size = self.padded_size(batch)
        pad = size - batch
        obs = np.concatenate([obs, np.zeros((pad, *self.obs_shape), self.obs_dtype)]) if pad else obs
        starts = np.concatenate([starts, np.ones(pad, bool)]) if pad else starts
        memory = None
        if self.recurrent:
            rows = list(memory_rows) + [self.row_memory] * pad
            memory = jax.tree.map(lambda *xs: np.concatenate(xs), *rows)
        actions, memory = self._act(list(leaves), memory, obs, starts, key)
        actions, memory = jax.device_get((actions, memory))
        if not self.recurrent:
            return np.asarray(actions)[:batch], [None] * batch
        after = [jax.tree.map(lambda x, i=i: x[i:i + 1], memory) for i in range(batch)]
        return np.asarray(actions)[:batch], after

    def warm_up(self, leaves: Sequence[jax.Array]) -> None:
        """Compile every padded batch size now, not on the first request of that size."""
        for size in self.sizes:
            obs = np.zeros((size, *self.obs_shape), self.obs_dtype)
            self.act(leaves, obs, np.ones(size, bool), [self.row_memory] * size,
                     jax.random.PRNGKey(0))


@dataclasses.dataclass(frozen=True)
class ServedRun:
    """A run's policy made ready to serve: the program, the leaves it reads, the run's record
    (agent, env, spec, config) and what one observation and action look like."""

    program: PolicyProgram
    leaves: list
    record: dict
    obs_shape: tuple[int, ...]
    obs_dtype: str
    discrete: bool
    num_actions: Optional[int]
    action_shape: tuple[int, ...]


def policy_template(module: Any, agent: Any, host: bool) -> PyTree:
    """The shapes of the state the agent's greedy policy takes (`jax.eval_shape`, no compute):
    the device loop's agent state, or the host loop's (its replay apart)."""
    key = jax.random.PRNGKey(0)
    if host:
        return jax.eval_shape(lambda k: module.host_fns(agent).init(k)[0], key)
    return jax.eval_shape(agent.init, key)


def action_description(spec: Any) -> tuple[bool, Optional[int], tuple[int, ...]]:
    """(discrete, number of actions or None, one action's shape) of an env spec."""
    if spec.discrete:
        return True, int(spec.action_space.n), ()
    return False, None, tuple(int(d) for d in spec.action_space.shape)
