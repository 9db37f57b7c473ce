"""What the Q-learning family (DQN, R2D2, QMIX and VDN) shares, written once: the config base
and its checks, the warm-up before the first gradient step, the learning rate by learner step
(pinned at both ends), the optimiser, and epsilon-greedy exploration (an annealed schedule, or
Ape-X's fixed rate per env).

Every rate and count here is a function of the config alone, so an agent, its tests and the
host loop compute the same schedule.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.core.config import (
    RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_open_unit_interval, check_positive, check_unit_interval,
)
from jaxrl_sys.core.learner import apex_rates, exact_linear_schedule
from jaxrl_sys.core.networks import ACTIVATIONS, TORSOS

EXPLORATIONS = ("schedule", "apex")  # annealed epsilon for all envs, or Ape-X's fixed per env


@dataclasses.dataclass(frozen=True)
class QLearningConfig(RolloutBudget):
    """The hyper-parameters every Q-learner here has (replay, warm-up, learning rate, targets,
    epsilon schedule) and their checks; each agent's Config adds its own fields and sets its
    own defaults."""

    total_steps: int = 200_000
    num_envs: int = 32
    updates_per_iteration: int = 4  # gradient steps per iteration
    buffer_size: int = 50_000  # replay rows per seed, over all envs
    batch_size: int = 256  # global, split over devices
    learning_starts: int = 1_000  # env steps per seed before learning
    learning_rate: float = 1e-3
    anneal_lr: bool = True  # linearly over the learner steps (the warm-up takes none)
    final_lr_fraction: float = 0.0  # learning rate at the end / learning_rate (0: freezes)
    max_grad_norm: float = 10.0
    gamma: float = 0.99
    n_step: int = 3
    double_q: bool = True  # the online network picks the next actions, the target values them
    target_update_period: int = 1  # gradient steps between target updates
    tau: float = 0.01  # 1.0: copy; < 1: Polyak averaging at every target update
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.25  # of total_steps
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"

    @property
    def warmup_steps(self) -> int:
        """Env steps per seed that replay must hold before the first gradient step.

        Returns:
            `learning_starts`.
        """
        return self.learning_starts

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "updates_per_iteration",
                       "batch_size", "n_step", "target_update_period")
        check_at_least(self, 0, "learning_starts")
        check_budget(self)
        check_positive(self, "learning_rate", "max_grad_norm", "tau")
        check_unit_interval(self, "gamma", "tau", "final_lr_fraction", "epsilon_start",
                            "epsilon_end", "exploration_fraction")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")


@dataclasses.dataclass(frozen=True)
class ApeXQConfig(QLearningConfig):
    """A single-agent Q-learner's further options (DQN's, R2D2's): Ape-X's per-env
    exploration, prioritised replay, a dueling head, the Huber loss and the torso."""

    dueling: bool = False
    huber_delta: float = 10.0
    # "schedule": every env anneals from epsilon_start to epsilon_end; "apex": env i of N keeps
    # epsilon apex_base ** (1 + apex_alpha * i / (N - 1)) for the whole run (Horgan et al. 2018)
    exploration: str = "schedule"
    apex_base: float = 0.4
    apex_alpha: float = 7.0
    prioritized: bool = False
    priority_alpha: float = 0.6
    priority_beta_start: float = 0.4  # annealed to 1 over training
    torso: str = "mlp"  # or "nature_cnn" (stacked frames, e.g. Atari), "grid_cnn" (MinAtar)

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        check_positive(self, "huber_delta")
        check_unit_interval(self, "priority_alpha", "priority_beta_start")
        check_choice(self, "exploration", EXPLORATIONS)
        check_open_unit_interval(self, "apex_base")
        check_at_least(self, 0, "apex_alpha")
        check_choice(self, "torso", TORSOS)


def first_learning_iteration(config: QLearningConfig) -> int:
    """The first iteration that learns: the one after which replay holds the config's
    `warmup_steps` (iterations count from 0).

    Args:
        config: the agent's Config.

    Returns:
        The iteration's index, 0 or more.
    """
    return max(0, -(-config.warmup_steps // config.steps_per_iteration) - 1)


def learner_steps(config: QLearningConfig) -> int:
    """Gradient steps in the config's `num_iterations`: the warm-up's iterations take none.

    Args:
        config: the agent's Config.

    Returns:
        The number of gradient steps, 0 or more.
    """
    learning_iterations = max(0, config.num_iterations - first_learning_iteration(config))
    return learning_iterations * config.updates_per_iteration


def learning_rate_schedule(config: QLearningConfig) -> optax.ScalarOrSchedule:
    """The learning rate by learner step (optax counts updates from 0): `learning_rate` at the
    first, `learning_rate * final_lr_fraction` at the last and after, linear between (if
    `anneal_lr`). Both ends are exact under jit, where XLA turns division into multiplication.

    Args:
        config: the agent's Config.

    Returns:
        The constant `learning_rate` (no `anneal_lr`), or a schedule: scalar update count -> scalar
            rate.
    """
    if not config.anneal_lr:
        return config.learning_rate
    return exact_linear_schedule(config.learning_rate,
                                 config.learning_rate * config.final_lr_fraction,
                                 learner_steps(config) - 1)


def build_optimizer(config: QLearningConfig,
                    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
                    ) -> optax.GradientTransformation:
    """`optimizer` (Adam unless given) at `learning_rate_schedule`'s rate on gradients clipped
    to `max_grad_norm`.

    Args:
        config: the agent's Config.
        optimizer: an optax optimiser taking the learning rate (or schedule) first.

    Returns:
        The optimiser.
    """
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                       optimizer(learning_rate_schedule(config)))


def epsilon_at(config: QLearningConfig, env_steps: jax.Array) -> jax.Array:
    """Linear exploration schedule over `exploration_fraction` of the run.

    Args:
        config: the agent's Config.
        env_steps: env steps taken over all envs, any shape (a scalar as the agents call it).

    Returns:
        Epsilon, `env_steps`' shape.
    """
    horizon = max(1.0, config.exploration_fraction * config.total_steps)
    frac = jnp.clip(env_steps / horizon, 0.0, 1.0)
    return config.epsilon_start + frac * (config.epsilon_end - config.epsilon_start)


def exploration_epsilons(config: ApeXQConfig, env_steps: jax.Array,
                         env_ids: jax.Array) -> jax.Array:
    """Each env's exploration rate [E] by global env id [E], so the rates are the same however
    the envs are split: `epsilon_at` for all, or Ape-X's fixed
    `apex_base ** (1 + apex_alpha * i / (N - 1))` for env i of N (`apex_base` if N = 1).

    Args:
        config: the agent's Config.
        env_steps: scalar, env steps taken over all envs.
        env_ids: [E] int32 global env ids.

    Returns:
        [E] float32 exploration rates.
    """
    if config.exploration == "apex":
        return apex_rates(config.apex_base, config.apex_alpha, env_ids, config.num_envs)
    return jnp.broadcast_to(epsilon_at(config, env_steps), env_ids.shape)


def mean_epsilon(config: ApeXQConfig, env_steps: jax.Array) -> jax.Array:
    """The exploration rate logged as `epsilon`: the schedule's, or the mean over all envs.

    Args:
        config: the agent's Config.
        env_steps: scalar, env steps taken over all envs.

    Returns:
        The scalar rate.
    """
    if config.exploration == "apex":
        return jnp.mean(exploration_epsilons(config, env_steps, jnp.arange(config.num_envs)))
    return epsilon_at(config, env_steps)


def epsilon_greedy(network: nn.Module, params: Any, obs: jax.Array, key: jax.Array,
                   greedy: bool = False, epsilon: jax.Array | float = 0.0) -> jax.Array:
    """Greedy or epsilon-greedy actions [B] of a Q-network (Q-values [B, A]) for observations
    [B, ...]; per-row keys [B] or one key; `epsilon` is one rate or one per row [B].

    Args:
        network: a Q-network with `num_actions`.
        params: its parameters.
        obs: [B, ...] observations.
        key: a PRNG key, or [B] keys (one per row).
        greedy: whether to take the argmax alone.
        epsilon: the exploration rate, a scalar or [B].

    Returns:
        [B] int32 actions.
    """
    greedy_actions = jnp.argmax(network.apply(params, obs), axis=-1)
    if greedy:
        return greedy_actions
    keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
    explore = jax.vmap(jax.random.uniform)(keys) < epsilon
    random_actions = jax.vmap(lambda k: jax.random.randint(k, (), 0, network.num_actions))(
        jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
    )
    return jnp.where(explore, random_actions, greedy_actions)

