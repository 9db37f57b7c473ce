"""What the policy-gradient family (PPO and APPO, IMPALA, MAPPO and IPPO) shares, written once:
the clipped-PPO config, the optimiser, minibatches that are the same whatever the envs' split
over devices, the SGD epoch loop, and the placement check of recurrent minibatches.

Minibatches are drawn by permuting time steps independently inside each env, keyed by the
env's global id (or, recurrent, by dealing whole env sequences from blocks of consecutive
ids): the global minibatch is then the same whether the envs sit on one device or are split
over many, which makes N-device training equal to 1-device training.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.learner import learning_rate
from jaxrl_sys.core.networks import ACTIVATIONS, MEMORIES
from jaxrl_sys.core.rollout import per_env_keys
from jaxrl_sys.core.types import Metrics, PyTree


OPTIMIZERS = ("adam", "rmsprop")


@dataclasses.dataclass(frozen=True)
class ClippedPPOConfig(RolloutBudget):
    """The hyper-parameters of every clipped-PPO learner here (PPO's, MAPPO's) and their checks;
    each agent's Config adds its own fields and sets its own defaults."""

    total_steps: int = 150_000
    num_envs: int = 32
    rollout_steps: int = 32
    update_epochs: int = 4
    num_minibatches: int = 4
    learning_rate: float = 2.5e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    # value updates clipped to +-clip_eps: suits small (normalised or scaled) returns only
    clip_value: bool = False
    max_grad_norm: float = 0.5
    optimizer: str = "adam"  # or "rmsprop" (A2C's: decay 0.99, eps 1e-5)
    normalize_advantages: bool = True
    reward_scale: float = 1.0
    hidden: tuple[int, ...] = (32, 32)
    activation: str = "tanh"
    memory: str = "none"  # or "gru", "lstm": a recurrent core (minibatches of whole sequences)
    memory_size: int = 128  # units of the recurrent core
    # lax.scan's unroll of the rollout loop, speed only (the same bits at any value, tested);
    # 0: `rollout_unroll_for` the backend (1 on CPU, 32 on an accelerator)
    rollout_unroll: int = 0

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "update_epochs",
                       "num_minibatches", "memory_size")
        check_at_least(self, 0, "rollout_unroll")
        check_budget(self)
        if self.memory == "none" and self.rollout_steps % self.num_minibatches:
            raise ConfigError(
                f"rollout_steps={self.rollout_steps} must be divisible by "
                f"num_minibatches={self.num_minibatches}"
            )
        if self.memory != "none" and self.num_envs % self.num_minibatches:
            raise ConfigError(
                f"memory={self.memory}: minibatches are sets of envs, so num_envs="
                f"{self.num_envs} must be divisible by num_minibatches={self.num_minibatches}")
        check_positive(self, "learning_rate", "max_grad_norm", "clip_eps", "reward_scale")
        check_unit_interval(self, "gamma", "gae_lambda")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "optimizer", OPTIMIZERS)
        check_layer_widths(self, "hidden")
        check_choice(self, "memory", MEMORIES)


def build_optimizer(config: Any) -> optax.GradientTransformation:
    """Adam (or, with `optimizer="rmsprop"`, RMSProp as A2C's paper and Stable-Baselines3
    set it: decay 0.99, eps 1e-5) with global-norm clipping and (optionally) a linearly
    annealed learning rate over every gradient step of the run (`num_iterations *
    update_epochs * num_minibatches`).

    Args:
        config: a `ClippedPPOConfig` (or one with its fields and `num_iterations`).

    Returns:
        The optimiser.
    """
    updates = config.num_iterations * config.update_epochs * config.num_minibatches
    lr = learning_rate(config.learning_rate, config.anneal_lr, updates)
    if config.optimizer == "rmsprop":
        descent = optax.rmsprop(lr, decay=0.99, eps=1e-5)
    else:
        descent = optax.adam(lr, eps=1e-5)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), descent)


def minibatch_indices(env_ids: jax.Array, key: jax.Array, config: Any) -> jax.Array:
    """Time indices [num_minibatches, T / num_minibatches, B]: each env's steps permuted with a
    key of the env's global id, so the global minibatch is the same whatever the envs' split
    over devices, then cut into minibatches. Recurrent: `env_minibatch_indices` instead.

    Args:
        env_ids: [B] int32 global ids of this device's envs.
        key: a PRNG key, the same on every device.
        config: the agent's Config (`rollout_steps`, `num_minibatches`, `memory`).

    Returns:
        [M, T / M, B] int32 time indices (M = num_minibatches, T = rollout_steps), or, recurrent,
            `env_minibatch_indices`' [M, B / M] env indices.
    """
    if config.memory != "none":
        return env_minibatch_indices(env_ids, key, config.num_minibatches)
    perms = jax.vmap(lambda k: jax.random.permutation(k, config.rollout_steps))(
        per_env_keys(key, env_ids)
    ).T  # [T, B]: for env b, time index perms[t, b] goes to slot t
    steps_per_minibatch = config.rollout_steps // config.num_minibatches
    return perms.reshape(config.num_minibatches, steps_per_minibatch, perms.shape[1])


def env_minibatch_indices(env_ids: jax.Array, key: jax.Array, num_minibatches: int) -> jax.Array:
    """Local env indices [num_minibatches, B / num_minibatches]: the envs in blocks of
    `num_minibatches` consecutive global ids, each block permuted with a key of its first id and
    dealt one env per minibatch. Every minibatch holds whole env sequences, and the same ones
    whatever the envs' split over devices (each device holds whole blocks).

    Args:
        env_ids: [B] int32 global ids of this device's envs.
        key: a PRNG key, the same on every device.
        num_minibatches: the number of minibatches M, dividing B.

    Returns:
        [M, B / M] int32 indices into this device's envs.
    """
    envs = env_ids.shape[0]
    if envs % num_minibatches:
        raise ConfigError(f"memory: each device's {envs} envs must divide into "
                          f"num_minibatches={num_minibatches} sets of whole sequences")
    blocks = envs // num_minibatches
    perms = jax.vmap(lambda k: jax.random.permutation(k, num_minibatches))(
        per_env_keys(key, env_ids[::num_minibatches] // num_minibatches))  # [blocks, M]
    return (perms + num_minibatches * jnp.arange(blocks)[:, None]).T


def take_envs(data: Any, idx: jax.Array) -> Any:
    """`data` (a NamedTuple of [T, B, ...] leaves with `memory` [B, ...]) at the env indices
    `idx` [M, b]: minibatches [M, T, b, ...] with their memory [M, b, ...].

    Args:
        data: a NamedTuple of leaves [T, B, ...] and `memory` [B, ...].
        idx: [M, b] env indices.

    Returns:
        `data` with leaves [M, T, b, ...] and `memory` [M, b, ...].
    """
    memory = jax.tree.map(lambda m: m[idx], data.memory)
    steps = jax.tree.map(lambda x: jnp.moveaxis(x[:, idx], 1, 0), data._replace(memory=None))
    return steps._replace(memory=memory)


def take_minibatches(data: Any, idx: jax.Array, config: Any) -> Any:
    """`data` [T, B, ...] as the minibatches of `minibatch_indices`' `idx`: [M, T/M, B, ...]
    steps, or (recurrent) [M, T, B/M, ...] env sequences.

    Args:
        data: a NamedTuple of leaves [T, B, ...] (and, recurrent, `memory` [B, ...]).
        idx: `minibatch_indices`' indices.
        config: the agent's Config (its `memory`).

    Returns:
        `data` with leaves [M, T / M, B, ...], or (recurrent) [M, T, B / M, ...] and memory
            [M, B / M, ...].
    """
    return take_envs(data, idx) if config.memory != "none" else take_steps(data, idx)


def take_steps(data: Any, idx: jax.Array) -> Any:
    """Every leaf [T, B, ...] of `data` at the per-env time indices `idx` [..., B].

    Args:
        data: leaves [T, B, ...].
        idx: [..., B] time indices per env (e.g. [M, T / M, B]).

    Returns:
        `data` with leaves [*idx.shape, ...].
    """
    def take(x):
        """One leaf [T, B, ...] gathered along time."""
        flat = idx.reshape(-1, idx.shape[-1])
        gathered = jnp.take_along_axis(x, flat.reshape(flat.shape + (1,) * (x.ndim - 2)), axis=0)
        return gathered.reshape(*idx.shape, *x.shape[2:])

    return jax.tree.map(take, data)


def shuffled_minibatches(data: Any, env_ids: jax.Array, key: jax.Array, config: Any) -> Any:
    """`data` [T, B, ...] as minibatches at `minibatch_indices`: steps permuted inside each
    env [num_minibatches, T / num_minibatches, B, ...], or (recurrent) sets of whole env
    sequences [num_minibatches, T, B / num_minibatches, ...].

    Args:
        data: a NamedTuple of leaves [T, B, ...] (and, recurrent, `memory` [B, ...]).
        env_ids: [B] int32 global ids of this device's envs.
        key: a PRNG key, the same on every device.
        config: the agent's Config.

    Returns:
        `data` with leaves [M, T / M, B, ...], or (recurrent) [M, T, B / M, ...] and memory
            [M, B / M, ...].
    """
    return take_minibatches(data, minibatch_indices(env_ids, key, config), config)


GradFn = Callable[[PyTree, Any], tuple[PyTree, Metrics]]


def minibatch_step(grad_fn: GradFn, optimizer: optax.GradientTransformation,
                   axis_name: Optional[str], carry: tuple[PyTree, PyTree],
                   batch: Any) -> tuple[tuple[PyTree, PyTree], Metrics]:
    """One gradient step on a minibatch: `grad_fn(params, batch) -> (grads, metrics)`,
    gradients averaged over the devices of `axis_name`, then the optimiser's update of the
    (params, opt_state) carry.

    Args:
        grad_fn: `grad_fn(params, batch) -> (grads, metrics)`.
        optimizer: the optimiser.
        axis_name: the device axis the gradients are averaged over, or None.
        carry: (params, opt_state).
        batch: one minibatch.

    Returns:
        carry: the new (params, opt_state).
        metrics: `grad_fn`'s metrics.
    """
    params, opt_state = carry
    grads, metrics = grad_fn(params, batch)
    grads = collectives.pmean(grads, axis_name)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), metrics


def sgd_epochs(step: Callable[[Any, Any], tuple[Any, Metrics]], carry: Any, epochs: int,
               epoch_minibatches: Callable[[jax.Array], Any], *, epoch_unroll: int = 1,
               minibatch_unroll: int = 1) -> tuple[Any, Metrics]:
    """`epochs` passes of `step(carry, minibatch) -> (carry, metrics)` over the minibatches
    `epoch_minibatches(epoch_index)` ([M, ...] leaves, scanned over M): the epoch loop every
    on-policy learner of the family runs. Metrics [epochs, M, ...].

    Args:
        step: `step(carry, minibatch) -> (carry, metrics)`, e.g. `minibatch_step` bound to its first
            three arguments.
        carry: the state the steps carry, e.g. (params, opt_state).
        epochs: the number of passes.
        epoch_minibatches: `epoch_minibatches(epoch_index)` -> minibatches, leaves [M, ...].
        epoch_unroll: `lax.scan`'s `unroll` over the epochs.
        minibatch_unroll: `lax.scan`'s `unroll` over the minibatches.

    Returns:
        carry: the carry after the last step.
        metrics: `step`'s metrics, leaves [epochs, M, ...].
    """
    def epoch(carry, epoch_index):
        """One pass over the epoch's minibatches."""
        return jax.lax.scan(step, carry, epoch_minibatches(epoch_index), unroll=minibatch_unroll)

    return jax.lax.scan(epoch, carry, jnp.arange(epochs), unroll=epoch_unroll)


def collect_then_update(collect: Callable[..., tuple[Any, Any, Metrics]],
                        update: Callable[..., tuple[Any, Metrics]], state: Any, env_state: Any,
                        key: jax.Array) -> tuple[Any, Any, Metrics]:
    """An on-policy iteration: `collect(params, env_state, key) -> (env_state, trajectory,
    episode metrics)` with the current parameters, then `update(state, trajectory, key) ->
    (state, metrics)` on what it collected; returns (state, env_state, both metrics).

    Args:
        collect: `collect(params, env_state, key) -> (env_state, trajectory, metrics)`.
        update: `update(state, trajectory, key) -> (state, metrics)`.
        state: the learner state, with `params`.
        env_state: the envs' state.
        key: a PRNG key, split between `collect` and `update`.

    Returns:
        state: `update`'s learner state.
        env_state: `collect`'s env state.
        metrics: `update`'s and `collect`'s metrics in one dict.
    """
    rollout_key, update_key = jax.random.split(key)
    env_state, trajectory, episodes = collect(state.params, env_state, rollout_key)
    state, metrics = update(state, trajectory, update_key)
    return state, env_state, {**metrics, **episodes}


def recurrent_placement_problem(config: Any, devices: int) -> Optional[str]:
    """A recurrent config's minibatches are sets of whole env sequences dealt from blocks of
    `num_minibatches` envs, so each device's envs must divide into them; None when they do
    (or the network has no memory).

    Args:
        config: the agent's Config (`num_envs`, `num_minibatches`, `memory`).
        devices: the number of devices the envs split over.

    Returns:
        The problem in one line, or None.
    """
    local = config.num_envs // devices
    if config.memory != "none" and local % config.num_minibatches:
        return (f"memory={config.memory}: {devices} devices leave {local} envs each, which do "
                f"not divide into num_minibatches={config.num_minibatches} sets of whole "
                "sequences")
    return None


# an accelerator runs a loop iteration as a few kernel launches: PPO at 16,384 envs on one H200
# ran 1.06x PureJaxRL's env-steps/s with no unroll, 1.17x at 8 and 1.20x at 32 (results/gpu.md)
ACCELERATOR_ROLLOUT_UNROLL = 32


def rollout_unroll_for(config: ClippedPPOConfig) -> int:
    """The rollout loop's `lax.scan` unroll: `config.rollout_unroll`, or where it is 0 the
    backend's (1 on CPU, where unrolling made the rollout slower, else 32), at most the
    rollout's length.

    Args:
        config: a config with `rollout_unroll` and `rollout_steps`.

    Returns:
        The unroll, from 1 to `rollout_steps`.
    """
    unroll = config.rollout_unroll or (
        1 if jax.default_backend() == "cpu" else ACCELERATOR_ROLLOUT_UNROLL)
    return min(unroll, config.rollout_steps)

