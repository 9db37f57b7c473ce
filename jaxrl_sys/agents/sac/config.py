"""SAC's hyper-parameters (`Config`) and the checks that reject values that cannot work."""

from __future__ import annotations

import dataclasses
from typing import Optional

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """SAC hyper-parameters; the defaults solve Pendulum-v1, other envs' tuned values are in
    defaults.py (see `default_config`)."""

    total_steps: int = 30_000
    num_envs: int = 4
    rollout_steps: int = 50  # vectorised env steps per iteration (per train_step call)
    buffer_size: int = 100_000  # total over envs; each env keeps buffer_size // num_envs
    batch_size: int = 256  # global, per gradient update (split over devices)
    learning_starts: int = 1_000  # env steps (all envs) of uniform random actions, no updates
    updates_per_step: int = 1  # gradient updates per vectorised env step
    gamma: float = 0.99
    tau: float = 0.01
    actor_learning_rate: float = 3e-3
    critic_learning_rate: float = 3e-3
    alpha_learning_rate: float = 1e-3
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    initial_alpha: float = 0.1
    target_entropy: Optional[float] = None  # None: -action_dim
    reward_scale: float = 1.0
    normalize_obs: bool = False
    # Exploration noise per env as an AR(1) process: each step keeps this share of the last
    # step's noise (unit variance either way). 0 is standard SAC's white noise; near 1 the
    # policy's perturbations last tens of steps and carry it far, which sparse rewards such
    # as MountainCarContinuous's need (Eberhard et al. 2023). On-device loop only.
    noise_correlation: float = 0.0

    @property
    def capacity_per_env(self) -> int:
        """Transitions each env's replay keeps."""
        return self.buffer_size // self.num_envs

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "buffer_size",
                       "batch_size", "updates_per_step")
        check_budget(self)
        check_at_least(self, 0, "learning_starts")
        if self.buffer_size % self.num_envs:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must be divisible by num_envs={self.num_envs}"
            )
        check_positive(self, "actor_learning_rate", "critic_learning_rate",
                       "alpha_learning_rate", "initial_alpha", "reward_scale", "tau")
        check_unit_interval(self, "gamma", "tau")
        if not 0.0 <= self.noise_correlation < 1.0:
            raise ConfigError(f"noise_correlation={self.noise_correlation} must be in [0, 1)")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
