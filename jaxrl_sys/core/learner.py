"""Pieces that several learners share: the learning-rate schedule, each device's share of a
global batch and its own random stream, and the warm-up gate of off-policy agents.

The gate keeps one compiled program for the whole run: a conditional runs the learner step
only once enough data has been collected.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.types import Metrics, PyTree


def learning_rate(
    initial: float, anneal: bool, num_updates: int, final_fraction: float = 0.0
) -> Union[float, optax.Schedule]:
    """`initial`, or a linear decay to `final_fraction * initial` over `num_updates` steps.

    Args:
        initial: the starting rate.
        anneal: whether to decay it.
        num_updates: update steps the decay takes.
        final_fraction: the rate at the end, as a fraction of `initial`.

    Returns:
        `initial` (a float), or an optax schedule of the update count.
    """
    if not anneal:
        return initial
    return optax.linear_schedule(initial, final_fraction * initial, num_updates)


def exact_linear_schedule(first: float, final: float, last_step: int) -> optax.Schedule:
    """The rate by update count: `first` at count 0, `final` at `last_step` and after, linear
    between. Both ends are exact under jit, where XLA turns optax.linear_schedule's division
    into a multiplication by the reciprocal and misses the end value in the last bits.

    Args:
        first: the rate at count 0.
        final: the rate from `last_step` on.
        last_step: the count where the decay ends (at least 1 is used).

    Returns:
        A schedule: scalar update count -> scalar rate.
    """
    last = max(1, last_step)

    def schedule(count: jax.Array) -> jax.Array:
        progress = jnp.clip(count / last, 0.0, 1.0)
        return jnp.where(count >= last, final, first + progress * (final - first))

    return schedule


def local_batch_size(batch_size: int, axis_name: Optional[str]) -> int:
    """This device's share of a global batch (inside the mapped body); it must divide evenly.

    Args:
        batch_size: the global batch size.
        axis_name: the device axis, or None (one device).

    Returns:
        `batch_size // devices`.
    """
    devices = collectives.axis_size(axis_name)
    if batch_size % devices:
        raise ConfigError(f"batch_size={batch_size} does not divide over {devices} devices")
    return batch_size // devices


def batch_placement_problem(config: Any, devices: int) -> Optional[str]:
    """One line when the global `batch_size` does not divide over `devices` (each device
    samples its share from its own envs' replay); None when it does. A replay agent's
    `placement_problem`, refused before anything starts.

    Args:
        config: a config with `batch_size`.
        devices: the number of devices the envs split over.

    Returns:
        The problem in one line, or None.
    """
    if config.batch_size % devices:
        return (f"batch_size={config.batch_size} does not divide over {devices} devices "
                "(each samples its share from its own envs' replay)")
    return None


def device_key(key: jax.Array, axis_name: Optional[str]) -> jax.Array:
    """`key` folded with this device's index (0 outside a mapped axis).

    The run key is replicated over devices; what must differ per device (search noise,
    replay sample positions) draws from this key, or every device would draw the same numbers.

    Args:
        key: a PRNG key, the same on every device.
        axis_name: the device axis, or None.

    Returns:
        This device's PRNG key.
    """
    return jax.random.fold_in(key, collectives.axis_index(axis_name))


@struct.dataclass
class TargetNetState:
    """Learner state of an agent with a target network (DQN, MuZero): online and target
    parameters, optimiser state, iterations run and gradient updates taken, and observation
    statistics where the agent normalises observations (`jaxrl_sys.core.obs_norm`; else None)."""

    params: Any
    target_params: Any
    opt_state: Any
    iteration: jax.Array
    updates: jax.Array
    obs_stats: Any = None


def init_target_net_state(params: PyTree, optimizer: optax.GradientTransformation
                          ) -> TargetNetState:
    """Fresh state: the target starts as a copy of the online parameters.

    Args:
        params: the online network's parameters.
        optimizer: the optimiser whose state to start.

    Returns:
        The state: target = online, both counters 0, no observation statistics.
    """
    zero = jnp.zeros((), jnp.int32)
    return TargetNetState(params, params, optimizer.init(params), zero, zero)


def gradient_step(state: TargetNetState, grads: PyTree, optimizer: optax.GradientTransformation,
                  *, target_update_period: int, tau: float,
                  axis_name: Optional[str]) -> TargetNetState:
    """One optimiser step on `grads` (averaged over devices); every `target_update_period`-th
    update the target moves to `(1 - tau) * target + tau * online` (tau 1: a copy).

    Args:
        state: the learner state.
        grads: this device's gradients, the structure of `state.params`.
        optimizer: the optimiser of `state.opt_state`.
        target_update_period: updates between moves of the target.
        tau: the target's step towards the online parameters (1: a copy).
        axis_name: the device axis the gradients are averaged over, or None.

    Returns:
        `state` with new parameters, optimiser state and target, and `updates` + 1.
    """
    grads = collectives.pmean(grads, axis_name)
    step, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, step)
    updates = state.updates + 1
    refresh = (updates % target_update_period) == 0
    target_params = jax.tree.map(
        lambda t, p: jnp.where(refresh, (1 - tau) * t + tau * p, t), state.target_params, params
    )
    return state.replace(params=params, target_params=target_params, opt_state=opt_state,
                         updates=updates)


def priority_beta(beta_start: float, iteration: jax.Array, num_iterations: int) -> jax.Array:
    """Prioritised replay's importance exponent, annealed from `beta_start` to 1 over the run.

    Args:
        beta_start: the exponent at iteration 0.
        iteration: scalar, the iterations run.
        num_iterations: the run's iterations.

    Returns:
        Scalar beta, 1 at the run's end.
    """
    progress = iteration / num_iterations
    return beta_start + progress * (1.0 - beta_start)


def replay_updates(update: Callable, state: PyTree, buffer: PyTree, key: jax.Array,
                   num_updates: int, unroll: int = 1) -> tuple[PyTree, PyTree, Metrics]:
    """`num_updates` calls of `update(state, buffer, key) -> (state, buffer, metrics)` in a
    scan (`unroll` as lax.scan's), each with its own key; metrics averaged over them.

    Args:
        update: `update(state, buffer, key) -> (state, buffer, metrics)`, metrics scalars.
        state: the learner state.
        buffer: the replay state.
        key: a PRNG key, split into one per update.
        num_updates: the number of updates.
        unroll: `lax.scan`'s `unroll`.

    Returns:
        state: the learner state after the last update.
        buffer: the replay state after the last update.
        metrics: each metric's mean over the updates (scalars).
    """
    def one_update(carry, k):
        state, buffer = carry
        state, buffer, metrics = update(state, buffer, k)
        return (state, buffer), metrics

    keys = jax.random.split(key, num_updates)
    (state, buffer), metrics = jax.lax.scan(one_update, (state, buffer), keys, unroll=unroll)
    return state, buffer, jax.tree.map(jnp.mean, metrics)


def learn_after_warmup(ready: jax.Array, learn: Callable, state: TargetNetState, buffer: PyTree,
                       key: jax.Array) -> tuple[TargetNetState, PyTree, Metrics]:
    """`learn(state, buffer, key)` once `ready`, else the state and buffer unchanged with NaN
    metrics; the iteration is counted either way.

    Args:
        ready: bool scalar, the same on every device.
        learn: `learn(state, buffer, key) -> (state, buffer, metrics)`.
        state: the learner state.
        buffer: the replay state.
        key: a PRNG key.

    Returns:
        state: the learner state, `iteration` + 1.
        buffer: the replay state.
        metrics: `learn`'s metrics, NaN where not `ready`.
    """
    state, buffer, metrics = when_ready(ready, learn, state, buffer, key)
    return state.replace(iteration=state.iteration + 1), buffer, metrics


def when_ready(ready: jax.Array, learn: Callable, state: PyTree, buffer: PyTree,
               key: jax.Array) -> tuple[PyTree, PyTree, Metrics]:
    """`learn(state, buffer, key) -> (state, buffer, metrics)` run only where `ready`, else
    `(state, buffer, NaN metrics)`: the warm-up costs no updates. One `lax.cond`, so one
    compiled program; `ready` must be the same on every device (collectives run inside), and
    under vmapped seeds the cond becomes a select that computes both sides.

    Args:
        ready: bool scalar, the same on every device.
        learn: `learn(state, buffer, key) -> (state, buffer, metrics)`.
        state: the learner state.
        buffer: the replay state.
        key: a PRNG key.

    Returns:
        state: `learn`'s state, or `state` where not `ready`.
        buffer: `learn`'s buffer, or `buffer` where not `ready`.
        metrics: `learn`'s metrics, NaN of the same shapes where not `ready`.
    """
    def skip(state, buffer, key):
        shapes = jax.eval_shape(learn, state, buffer, key)[2]
        return state, buffer, jax.tree.map(lambda m: jnp.full(m.shape, jnp.nan, m.dtype), shapes)

    return jax.lax.cond(ready, learn, skip, state, buffer, key)


def apex_rates(base: float, alpha: float, env_ids: jax.Array, num_envs: int) -> jax.Array:
    """Ape-X's fixed exploration rate per env (Horgan et al. 2018): env i of N keeps
    `base ** (1 + alpha * i / (N - 1))` (`base` if N = 1) for the whole run, by global env
    id, so the rates are the same however the envs are split over devices. The Q family
    takes it as epsilon, the deterministic-policy family as its noise scale.

    Args:
        base: the rate of env 0.
        alpha: how fast the rates fall with the env id.
        env_ids: [E] int32 global env ids.
        num_envs: N, the envs of a seed over all devices.

    Returns:
        [E] float32 rates.
    """
    spread = env_ids.astype(jnp.float32) / max(1, num_envs - 1)
    return jnp.power(base, 1.0 + alpha * spread)

