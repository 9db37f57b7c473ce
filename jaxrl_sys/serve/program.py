"""The served policy as one compiled function of the state leaves it reads.

A run's agent state holds more than acting needs (optimiser moments, target networks, replay).
Tracing the greedy policy once finds the leaves it reads; the server keeps those on device and
sends them to local-inference clients, which rebuild the same program from the run's record
(`policy_from_record`) and check it against the server's `Manifest`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

from jaxrl_sys.core.evaluation import stateful
from jaxrl_sys.core.types import HostFns, PyTree


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


class ActingPolicy(NamedTuple):
    """How the served program acts, one form for the greedy policy and the learner's exploring
    one:

    initial(batch) -> memory [B, ...] (None for a feed-forward policy)
    step(state, memory, obs, starts, key, env_steps, env_ids) -> (actions, memory, extras)
        obs [B, ...]; starts bool [B]: rows that begin an episode; env_steps: steps taken so
        far (the exploration schedule's clock); env_ids int32 [B]: each row's lane;
        extras: what the learner needs besides the action (log-probs), each [B, ...]
    """

    initial: Callable[[int], PyTree]
    step: Callable[..., tuple[jax.Array, PyTree, dict]]


def greedy_acting(policy: Any) -> ActingPolicy:
    """The agent's greedy policy (`greedy_action`: a function or a RecurrentPolicy): what a
    trained run serves."""
    recurrent = stateful(policy)

    def step(state, memory, obs, starts, key, env_steps, env_ids):
        del env_steps, env_ids
        actions, memory = recurrent.step(state, memory, obs, starts, key)
        return actions, memory, {}

    return ActingPolicy(recurrent.initial, step)


def exploring_acting(fns: HostFns) -> ActingPolicy:
    """The host loop's `act` (epsilon-greedy, sampled actions) on the actor parameters: what a
    learning server acts with. Feed-forward agents only."""

    def step(actor_params, memory, obs, starts, key, env_steps, env_ids):
        del starts
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(obs.shape[0]))
        actions, extras = fns.act(actor_params, obs, keys, env_steps, env_ids)
        return actions, memory, extras

    return ActingPolicy(lambda batch: None, step)


def read_leaves(template: PyTree, acting: ActingPolicy, obs_shape: Sequence[int],
                obs_dtype: str, memory: PyTree) -> tuple[int, ...]:
    """Indices of the flattened `template`'s leaves that `acting.step` reads, found by tracing
    it on one observation.

    Args:
        template: the policy's state (arrays or `jax.ShapeDtypeStruct`s).
        acting: the policy.
        obs_shape: one observation's shape.
        obs_dtype: the observations' dtype.
        memory: the memory of one row (`initial(1)`), or None.

    Returns:
        The indices, ascending.
    """
    leaves, treedef = jax.tree.flatten(template)
    shapes = [jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves]

    def act(state_leaves):
        return acting.step(jax.tree.unflatten(treedef, state_leaves), memory,
                           jnp.zeros((1, *obs_shape), obs_dtype), jnp.ones(1, bool),
                           jax.random.PRNGKey(0), jnp.int32(0), jnp.zeros(1, jnp.int32))

    jaxpr = jax.make_jaxpr(act)(shapes).jaxpr
    read = {id(v) for eqn in jaxpr.eqns for v in eqn.invars if isinstance(v, jax_core.Var)}
    read |= {id(v) for v in jaxpr.outvars if isinstance(v, jax_core.Var)}
    return tuple(i for i, v in enumerate(jaxpr.invars[:len(leaves)]) if id(v) in read)


class PolicyProgram:
    """`acting.step` compiled once per padded batch size, over only the leaves of the state it
    reads (the others are zeros XLA removes).

    Args:
        acting: how it acts (`greedy_acting`, `exploring_acting`).
        template: the policy's whole state (arrays or `jax.ShapeDtypeStruct`s).
        obs_shape: one observation's shape; obs_dtype: its dtype.
        max_batch: the largest batch one call takes.
        used: the leaves the policy reads, where already known (a client takes the server's).
    """

    def __init__(self, acting: ActingPolicy, template: PyTree, obs_shape: Sequence[int],
                 obs_dtype: str, max_batch: int, used: Optional[Sequence[int]] = None):
        self.acting = acting
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.obs_dtype = np.dtype(obs_dtype)
        self.sizes = batch_sizes(max_batch)
        leaves, self._treedef = jax.tree.flatten(template)
        shapes = tuple(tuple(np.shape(x)) for x in leaves)
        dtypes = tuple(str(np.dtype(x.dtype)) for x in leaves)
        self.row_memory = acting.initial(1)
        if used is None:
            used = read_leaves(template, acting, self.obs_shape, str(self.obs_dtype),
                               self.row_memory)
        self.manifest = Manifest(shapes, dtypes, tuple(used))
        self._act = jax.jit(self._act_on_leaves)
        action, _, extras = jax.eval_shape(
            self._act_on_leaves, [jax.ShapeDtypeStruct(shapes[i], dtypes[i]) for i in used],
            self.row_memory, jax.ShapeDtypeStruct((1, *self.obs_shape), self.obs_dtype),
            jax.ShapeDtypeStruct((1,), bool), jax.random.PRNGKey(0),
            jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((1,), jnp.int32))
        # one action's shape and dtype, and what each step records besides the action
        # (log-probs): name -> (row shape, dtype)
        self.action = (tuple(action.shape[1:]), str(action.dtype))
        self.extras = {k: (tuple(v.shape[1:]), str(v.dtype)) for k, v in extras.items()}

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries memory from step to step."""
        return self.row_memory is not None

    def leaves_of(self, state: PyTree) -> list[jax.Array]:
        """The leaves of a whole policy state that `act` takes, in order."""
        leaves = jax.tree.leaves(state)
        return [jnp.asarray(leaves[i]) for i in self.manifest.used]

    def _act_on_leaves(self, used_leaves, memory, obs, starts, key, env_steps, env_ids):
        """The policy's step on a state rebuilt from the leaves it reads."""
        state_leaves = [jnp.zeros(s, d) for s, d in zip(self.manifest.shapes, self.manifest.dtypes)]
        for i, leaf in zip(self.manifest.used, used_leaves):
            state_leaves[i] = leaf
        state = jax.tree.unflatten(self._treedef, state_leaves)
        return self.acting.step(state, memory, obs, starts, key, env_steps, env_ids)

    def padded_size(self, batch: int) -> int:
        """The compiled batch size that a batch of `batch` rows is padded to."""
        for size in self.sizes:
            if size >= batch:
                return size
        raise ValueError(f"a batch of {batch} rows exceeds the largest, {self.sizes[-1]}")

    def act(self, leaves: Sequence[jax.Array], obs: np.ndarray, starts: np.ndarray,
            memory_rows: Sequence[PyTree], key: jax.Array, env_steps: int = 0,
            env_ids: Optional[np.ndarray] = None) -> tuple[np.ndarray, list[dict], list[PyTree]]:
        """Actions for observations [B, ...] (padded to a compiled size), each row's extras
        and each row's memory after the step.

        Args:
            leaves: the used leaves (`leaves_of`).
            obs: observations [B, ...]; starts: bool [B], the rows that begin an episode.
            memory_rows: each row's memory before the step (`row_memory` shape), or Nones.
            key: the batch's randomness.
            env_steps: steps taken so far; env_ids: int [B], each row's lane (default 0).

        Returns:
            Actions [B, ...] as numpy, the B rows' extras (dicts of numpy) and their memory
            after the step.
        """
        batch = obs.shape[0]
        size = self.padded_size(batch)
        pad = size - batch
        env_ids = np.zeros(batch, np.int32) if env_ids is None else np.asarray(env_ids, np.int32)
        if pad:
            obs = np.concatenate([obs, np.zeros((pad, *self.obs_shape), self.obs_dtype)])
            starts = np.concatenate([starts, np.ones(pad, bool)])
            env_ids = np.concatenate([env_ids, np.zeros(pad, np.int32)])
        memory = None
        if self.recurrent:
            rows = list(memory_rows) + [self.row_memory] * pad
            memory = jax.tree.map(lambda *xs: np.concatenate(xs), *rows)
        actions, memory, extras = jax.device_get(self._act(
            list(leaves), memory, obs, starts, key, np.int32(env_steps), env_ids))
        extra_rows = [{k: np.asarray(v)[i] for k, v in extras.items()} for i in range(batch)]
        if not self.recurrent:
            return np.asarray(actions)[:batch], extra_rows, [None] * batch
        after = [jax.tree.map(lambda x, i=i: x[i:i + 1], memory) for i in range(batch)]
        return np.asarray(actions)[:batch], extra_rows, after

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


def actor_template(fns: HostFns) -> PyTree:
    """The shapes of the host loop's actor parameters (what `exploring_acting` reads)."""
    return jax.eval_shape(lambda k: fns.actor_params(fns.init(k)[0]), jax.random.PRNGKey(0))


def action_description(spec: Any) -> tuple[bool, Optional[int], tuple[int, ...]]:
    """(discrete, number of actions or None, one action's shape) of an env spec."""
    if spec.discrete:
        return True, int(spec.action_space.n), ()
    return False, None, tuple(int(d) for d in spec.action_space.shape)
