"""TD3's hyper-parameters (`Config`), DDPG's as a setting of them, and the checks that reject
values that cannot work."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_open_unit_interval, check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS

# "fixed": every env explores with `exploration_noise`; "apex": env i of N keeps the scale
# apex_base ** (1 + apex_alpha * i / (N - 1)) for the whole run (Ape-X DDPG's per-actor noise)
EXPLORATIONS = ("fixed", "apex")


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """TD3 hyper-parameters (Fujimoto et al. 2018): clipped double-Q over twin critics, actor
    and targets updated every `policy_delay` critic steps, target policy smoothing; DDPG is
    `twin_critics=False, policy_delay=1, policy_noise=0` (the `ddpg` agent's defaults). The
    defaults solve Pendulum-v1; other envs' tuned values are in defaults.py."""

    total_steps: int = 30_000
    num_envs: int = 4
    rollout_steps: int = 50  # vectorised env steps per iteration (per train_step call)
    buffer_size: int = 100_000  # total over envs; each env keeps buffer_size // num_envs
    batch_size: int = 256  # global, per gradient update (split over devices)
    learning_starts: int = 1_000  # env steps (all envs) of uniform random actions, no updates
    updates_per_step: int = 1  # gradient updates per vectorised env step
    gamma: float = 0.99
    tau: float = 0.005  # Polyak rate of the target actor and critics
    actor_learning_rate: float = 1e-3
    critic_learning_rate: float = 1e-3
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    twin_critics: bool = True  # clipped double-Q: the target is the smaller of two critics
    policy_delay: int = 2  # critic updates per actor and target update
    policy_noise: float = 0.2  # target policy smoothing's noise (in [-1, 1] action units)
    noise_clip: float = 0.5  # and its clip
    exploration_noise: float = 0.1  # Gaussian acting noise (in [-1, 1] action units)
    # the acting noise per env as an AR(1) process keeping this share of the last step's
    # (unit variance either way; 0: white noise), as SAC's; on-device loop only
    noise_correlation: float = 0.0
    exploration: str = "fixed"
    apex_base: float = 0.4
    apex_alpha: float = 7.0
    normalize_obs: bool = False

    @property
    def capacity_per_env(self) -> int:
        """Transitions each env's replay keeps."""
        return self.buffer_size // self.num_envs

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "buffer_size",
                       "batch_size", "updates_per_step", "policy_delay")
        check_budget(self)
        check_at_least(self, 0, "learning_starts", "policy_noise", "noise_clip",
                       "exploration_noise", "apex_alpha")
        if self.buffer_size % self.num_envs:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must be divisible by num_envs={self.num_envs}"
            )
        check_positive(self, "actor_learning_rate", "critic_learning_rate", "tau")
        check_unit_interval(self, "gamma", "tau")
        if not 0.0 <= self.noise_correlation < 1.0:
            raise ConfigError(f"noise_correlation={self.noise_correlation} must be in [0, 1)")
        check_choice(self, "exploration", EXPLORATIONS)
        check_open_unit_interval(self, "apex_base")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
