"""Placement of one agent on seeds and devices, chosen at launch, never inside the agent.

An agent supplies two pure functions for ONE seed on ONE device shard:

    init_fn(key, env_ids)            -> (agent_state, env_state)
    step_fn(agent_state, env_state, key) -> (agent_state, env_state, metrics)

`step_fn` averages gradients with `lax.pmean(..., DEVICE_AXIS)`. This module wraps them as

    jit( shard_map over mesh axis "device"  (envs split, agent state replicated)
         ( vmap over seeds ( lax.scan of K step_fn calls ) ) )

so a single device, many seeds and many devices all run the same agent code: one device is
a mesh of size 1. Every leaf of `env_state` has shape [num_envs_local, ...]; every env is
named by its global index (`env_ids`), so per-env randomness, and therefore the whole run,
does not depend on how envs are split over devices.

A hyper-parameter sweep (`place_rows`) adds a second mesh axis, "rows": the settings x
seeds rows are split over it (each row's envs stay on one device), and every row gets its
own hyper-parameters as traced values, so the agent code is the same; see jaxrl_sys/sweep.py.

`shard_map` runs with `check_vma=False`: with the default `check_vma=True` the gradient of a
replicated parameter is already summed over the axis inside the body, and the agent's
`pmean` would then return the sum instead of the mean (see tests/test_execution.py).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxrl_sys.core.types import Metrics, PyTree

DEVICE_AXIS = "device"  # envs split over devices; the agent's gradients are averaged over it
ROWS_AXIS = "rows"  # seeds (x sweep settings) split over devices
STATE_FINITE = "state_finite"  # the chunk metric the driver's non-finite check reads


def all_finite(tree: PyTree) -> jax.Array:
    """Whether every floating-point leaf of `tree` is finite (a bool scalar)."""
    leaves = [x for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.floating)]
    if not leaves:
        return jnp.array(True)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def strongly_typed(tree: PyTree) -> PyTree:
    """`tree` with every weakly typed leaf (a Python number's type, as an env's step counter
    often has) made strongly typed, of the same dtype and value. A restored checkpoint's
    arrays are strongly typed, so a carry built this way compiles the same chunk program
    whether it was initialised or restored (a resumed run then finds it in the compilation
    cache)."""
    return jax.tree.map(
        lambda x: jax.lax.convert_element_type(x, x.dtype) if getattr(x, "weak_type", False)
        else x, tree)


InitFn = Callable[[jax.Array, jax.Array], tuple[PyTree, PyTree]]
StepFn = Callable[[PyTree, PyTree, jax.Array], tuple[PyTree, PyTree, Metrics]]
# eval_fn(agent_state, key, episode_ids) -> (returns, lengths) for the local episode ids.
EvalFn = Callable[[PyTree, jax.Array, jax.Array], tuple[jax.Array, jax.Array]]
# a row's hyper-parameters (name -> scalar, traced inside the compiled program)
Settings = dict[str, jax.Array]
# build(settings) -> (init_fn, step_fn, eval_fn or None) of an agent made with `settings`
BuildFn = Callable[[Settings], tuple[InitFn, StepFn, Optional[EvalFn]]]


def vmap_rows(fn: Callable) -> Callable:
    """`jax.vmap(fn)` over a leading row axis, except that one row runs unbatched.

    The values are the same up to rounding; the code is not: XLA:CPU compiles some programs
    with a batch axis of 1 much slower than without it (Brax's physics loops: 291 against 162
    ms per PPO step of 2048 brax:inverted_pendulum envs), and one seed on a device is the
    common case.
    """
    batched = jax.vmap(fn)

    def run(*args: PyTree) -> PyTree:
        if {x.shape[0] for x in jax.tree.leaves(args)} != {1}:
            return batched(*args)
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: jnp.expand_dims(x, 0), out)

    return run


def placement_fns(agent) -> tuple[InitFn, StepFn]:
    """(init_fn, step_fn) for `place`, or a user's own jit/vmap, from an agent with
    `init(key)`, `init_envs(key, env_ids)` and `train_step(state, env_state, key)` (every
    agent that an `agents/` module's `make` returns).

    init_fn(key, env_ids) -> (agent_state, env_state)   env_ids: int32 [envs] of this device
    step_fn(agent_state, env_state, key) -> (agent_state, env_state, metrics)
    """

    def init_fn(key: jax.Array, env_ids: jax.Array) -> tuple[PyTree, PyTree]:
        params_key, env_key = jax.random.split(key)
        return agent.init(params_key), agent.init_envs(env_key, env_ids)

    return init_fn, agent.train_step


class PlacementError(ValueError):
    """A placement that cannot work (e.g. envs that do not divide over devices)."""


@dataclasses.dataclass(frozen=True)
class Carry:
    """Everything a run carries between chunks: [seeds, ...] leading axis on every leaf."""

    agent_state: PyTree
    env_state: PyTree
    key: jax.Array


jax.tree_util.register_dataclass(
    Carry, data_fields=["agent_state", "env_state", "key"], meta_fields=[]
)


def make_mesh(num_devices: int) -> Mesh:
    """A 1-D mesh over the first `num_devices` devices with axis name "device"."""
    available = jax.devices()
    if num_devices < 1 or num_devices > len(available):
        raise PlacementError(
            f"asked for {num_devices} devices but {len(available)} "
            f"{available[0].platform.upper()} device(s) exist"
        )
    return Mesh(np.asarray(available[:num_devices]), (DEVICE_AXIS,))


def make_grid_mesh(row_devices: int, env_devices: int) -> Mesh:
    """A `row_devices` x `env_devices` mesh (axes "rows", "device") over the first devices."""
    devices = make_mesh(row_devices * env_devices).devices
    return Mesh(devices.reshape(row_devices, env_devices), (ROWS_AXIS, DEVICE_AXIS))


class ChunkFn:
    """`run_chunk(carry) -> (carry, metrics)`: one compiled chunk that takes the rows' traced
    hyper-parameters as an argument, so population training can change them between chunks
    without compiling again; `lower(carry).compile()` works as for a jitted function."""

    def __init__(self, jitted: Callable, settings: Settings, sharding: NamedSharding) -> None:
        self._jitted, self._sharding = jitted, sharding
        self.settings = settings

    def __call__(self, carry: "Carry") -> tuple["Carry", Metrics]:
        return self._jitted(carry, self.settings)

    def lower(self, carry: "Carry") -> "_LoweredChunk":
        return _LoweredChunk(self._jitted.lower(carry, self.settings), self)

    def host_settings(self) -> dict[str, np.ndarray]:
        """The rows' current values, name -> [rows] float32."""
        return {k: np.asarray(v) for k, v in self.settings.items()}

    def set_settings(self, values: dict[str, np.ndarray]) -> None:
        """Use `values` (the same names, one float per row) from the next chunk on."""
        current = self.host_settings()
        if set(values) != set(current) or any(
                np.shape(values[k]) != current[k].shape for k in current):
            raise PlacementError(f"settings must keep their names and rows: {sorted(current)}")
        self.settings = jax.device_put(
            {k: np.asarray(values[k], current[k].dtype) for k in current}, self._sharding)


class _LoweredChunk:
    """A lowered `ChunkFn`; `compile()` gives a callable of the carry alone."""

    def __init__(self, lowered: jax.stages.Lowered, owner: ChunkFn) -> None:
        self._lowered, self._owner = lowered, owner

    def compile(self) -> Callable[["Carry"], tuple["Carry", Metrics]]:
        compiled = self._lowered.compile()
        return lambda carry: compiled(carry, self._owner.settings)

    def compiled_text(self) -> str:
        """The optimised HLO text of the compiled chunk (`tools.op_counts` reads it)."""
        return self._lowered.compile().as_text()


@dataclasses.dataclass(frozen=True)
class Runner:
    """Compiled entry points of a placed agent.

    `init(seeds)` builds the carry for the given integer seeds (one per row); `run_chunk(carry)`
    runs `iters_per_chunk` training iterations for every row in one dispatch, donating
    `carry`, and returns the new carry and metrics shaped [rows, iters_per_chunk].
    """

    init: Callable[[np.ndarray], Carry]
    run_chunk: Callable[[Carry], tuple[Carry, Metrics]]  # a `ChunkFn` from `place_rows`
    mesh: Mesh
    num_envs: int
    iters_per_chunk: int

    def carry_sharding(self) -> Carry:
        """How a carry's parts lie on the mesh (agent state and key by row, env state by row
        and env shard): for placing rows taken from another runner's carry."""
        rows = NamedSharding(self.mesh, P(ROWS_AXIS))
        return Carry(agent_state=rows, env_state=NamedSharding(self.mesh, P(ROWS_AXIS, DEVICE_AXIS)),
                     key=rows)


def copy_agent_rows(carry: Carry, sources: np.ndarray) -> Carry:
    """`carry` with row i's agent state (parameters, optimiser state, replay, statistics,
    counters) replaced by row `sources[i]`'s; env states and keys stay each row's own.
    Population training's exploit step; the carry keeps its shardings."""
    sharding = jax.tree.map(lambda x: x.sharding, carry.agent_state)
    take = jax.jit(_take_rows, out_shardings=sharding)
    return dataclasses.replace(
        carry, agent_state=take(carry.agent_state, jnp.asarray(sources, jnp.int32)))


def _take_rows(tree: PyTree, rows: jax.Array) -> PyTree:
    """Rows `rows` [R] of every leaf of `tree` (leading axis)."""
    return jax.tree.map(lambda x: jnp.take(x, rows, axis=0), tree)


def check_placement(num_envs: int, num_devices: int, eval_episodes: int = 0) -> None:
    """PlacementError unless envs and evaluation episodes split evenly over the devices.

    Needs no device, so callers can refuse a placement before creating any.
    """
    if num_envs % num_devices:
        raise PlacementError(f"num_envs={num_envs} does not divide over {num_devices} devices")
    if eval_episodes % num_devices:
        raise PlacementError(
            f"eval_episodes={eval_episodes} does not divide over {num_devices} devices"
        )


def place(
    init_fn: InitFn,
    step_fn: StepFn,
    *,
    num_envs: int,
    num_devices: int = 1,
    iters_per_chunk: int = 1,
    eval_fn: Optional[EvalFn] = None,
    eval_episodes: int = 0,
    eval_outcomes: bool = False,
) -> Runner:
    """Place an agent on `num_devices` devices with `num_envs` envs per seed (global).

    With `eval_fn` and `eval_episodes > 0`, every chunk ends with a greedy evaluation of
    `eval_episodes` episodes (split over devices) inside the same compiled call; its mean
    return and length come back as metrics `eval_return` and `eval_length`, shape [seeds].
    With `eval_outcomes` (games, whose returns are +1 win, 0 draw, -1 loss) also the
    fractions `eval_win`, `eval_draw` and `eval_loss`.
    """
    return place_rows(lambda _settings: (init_fn, step_fn, eval_fn), num_envs=num_envs,
                      env_devices=num_devices, iters_per_chunk=iters_per_chunk,
                      eval_episodes=eval_episodes, eval_outcomes=eval_outcomes)


def place_rows(
    build: BuildFn,
    *,
    num_envs: int,
    settings: Optional[dict[str, np.ndarray]] = None,
    row_devices: int = 1,
    env_devices: int = 1,
    iters_per_chunk: int = 1,
    eval_episodes: int = 0,
    eval_outcomes: bool = False,
    seeds_per_setting: int = 0,
) -> Runner:
    """`place` for rows that may differ in hyper-parameters: row i trains the agent that
    `build({name: settings[name][i]})` gives (traced values, one compiled program for all).

    The mesh is `row_devices` x `env_devices` (axes "rows" and "device"): rows are split over
    the first, each row's envs over the second; `runner.init(seeds)` then takes one seed per
    row, as many as each `settings` array has entries. `place` is the case of one setting.

    With `seeds_per_setting` N > 0 (rows setting-major, N consecutive rows per setting), a
    device runs its settings one after another (`lax.map`), each with its N seeds vmapped:
    every setting then computes exactly what a run of N seeds computes, on any number of
    devices. With 0, all rows of a device are vmapped together (faster on an accelerator;
    XLA's code, and so the last bits of every row, then depend on the number of rows).
    """
    settings = {k: np.asarray(v) for k, v in (settings or {}).items()}
    check_placement(num_envs, env_devices, eval_episodes)
    lengths = {len(v) for v in settings.values()}
    if len(lengths) > 1:
        raise PlacementError(f"settings of different lengths: {sorted(lengths)}")
    mesh = make_grid_mesh(row_devices, env_devices)
    local_envs = num_envs // env_devices
    row_spec = P(ROWS_AXIS)
    carry_specs = Carry(agent_state=row_spec, env_state=P(ROWS_AXIS, DEVICE_AXIS), key=row_spec)

    def local_env_ids() -> jax.Array:
        offset = jax.lax.axis_index(DEVICE_AXIS) * local_envs
        return offset + jnp.arange(local_envs, dtype=jnp.int32)

    def init_one_row(seed: jax.Array, row_settings: Settings) -> Carry:
        init_fn, _, _ = build(row_settings)
        init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
        agent_state, env_state = init_fn(init_key, local_env_ids())
        return strongly_typed(Carry(agent_state, env_state, run_key))

    def chunk_one_row(carry: Carry, row_settings: Settings) -> tuple[Carry, Metrics]:
        _, step_fn, eval_fn = build(row_settings)

        def body(c: Carry, _: None) -> tuple[Carry, Metrics]:
            key, step_key = jax.random.split(c.key)
            agent_state, env_state, metrics = step_fn(c.agent_state, c.env_state, step_key)
            return Carry(agent_state, env_state, key), metrics

        carry, metrics = jax.lax.scan(body, carry, None, length=iters_per_chunk)
        metrics[STATE_FINITE] = all_finite(carry.agent_state)  # for the driver's NaN guard
        if eval_fn is not None and eval_episodes > 0:
            local = eval_episodes // env_devices
            ids = jax.lax.axis_index(DEVICE_AXIS) * local + jnp.arange(local, dtype=jnp.int32)
            eval_key = jax.random.fold_in(carry.key, 0x5EED)
            returns, lengths = eval_fn(carry.agent_state, eval_key, ids)
            metrics["eval_return"] = jax.lax.pmean(jnp.mean(returns), DEVICE_AXIS)
            metrics["eval_length"] = jax.lax.pmean(jnp.mean(lengths), DEVICE_AXIS)
            if eval_outcomes:
                for name, hit in (("win", returns > 0), ("draw", returns == 0),
                                  ("loss", returns < 0)):
                    metrics[f"eval_{name}"] = jax.lax.pmean(jnp.mean(hit), DEVICE_AXIS)
        return carry, metrics

    def over_rows(fn: Callable) -> Callable:
        """`fn` over the local rows: all vmapped, or settings mapped with seeds vmapped."""
        if not seeds_per_setting:
            return vmap_rows(fn)

        def mapped(*args: PyTree) -> PyTree:
            split = jax.tree.map(lambda x: x.reshape(-1, seeds_per_setting, *x.shape[1:]), args)
            out = jax.lax.map(lambda a: vmap_rows(fn)(*a), split)
            return jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), out)

        return mapped

    init_sharded = jax.shard_map(
        over_rows(init_one_row),
        mesh=mesh,
        in_specs=(row_spec, row_spec),
        out_specs=carry_specs,
        check_vma=False,
    )
    chunk_sharded = jax.shard_map(
        over_rows(chunk_one_row),
        mesh=mesh,
        in_specs=(carry_specs, row_spec),
        out_specs=(carry_specs, row_spec),
        check_vma=False,
    )
    rows_sharding = NamedSharding(mesh, row_spec)
    device_settings = jax.device_put(settings, rows_sharding)
    init_jit = jax.jit(init_sharded)
    run_chunk = ChunkFn(jax.jit(chunk_sharded, donate_argnums=0), device_settings,
                        rows_sharding)

    def init(seeds: np.ndarray) -> Carry:
        seeds = np.asarray(seeds, dtype=np.uint32)
        if settings and len(seeds) != len(next(iter(settings.values()))):
            raise PlacementError(f"{len(seeds)} seeds for {len(next(iter(settings.values())))} "
                                 "rows of settings")
        per_device = max(seeds_per_setting, 1) * row_devices
        if len(seeds) % per_device:
            raise PlacementError(f"{len(seeds)} rows do not divide over {row_devices} devices"
                                 + (f" in whole settings of {seeds_per_setting} seeds"
                                    if seeds_per_setting else ""))
        return init_jit(jax.device_put(seeds, rows_sharding), run_chunk.settings)

    return Runner(
        init=init,
        run_chunk=run_chunk,
        mesh=mesh,
        num_envs=num_envs,
        iters_per_chunk=iters_per_chunk,
    )
