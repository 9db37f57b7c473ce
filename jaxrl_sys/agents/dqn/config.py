"""DQN's hyper-parameters and the checks that reject values which cannot work."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_open_unit_interval, check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS, TORSOS

EXPLORATIONS = ("schedule", "apex")  # annealed epsilon for all envs, or Ape-X's fixed per env


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """DQN hyper-parameters; the defaults solve CartPole-v1 (greedy evaluation).

    Short n-step returns need the Huber loss to be close to squared error (returns run to the
    hundreds; with delta 1 the gradient is sign-only) and more, smoothed target updates: the
    defaults take 4 gradient steps per 32 env steps and a Polyak target.
    """

    total_steps: int = 200_000
    num_envs: int = 32
    rollout_steps: int = 1  # vectorised env steps per iteration
    updates_per_iteration: int = 4  # gradient steps per iteration
    buffer_size: int = 50_000  # transitions per seed, over all envs
    batch_size: int = 256  # global, split over devices
    learning_starts: int = 1_000  # env steps per seed before learning
    learning_rate: float = 1e-3
    anneal_lr: bool = True  # linearly over the learner steps (the warm-up takes none)
    final_lr_fraction: float = 0.0  # learning rate at the end / learning_rate (0: freezes)
    max_grad_norm: float = 10.0
    gamma: float = 0.99
    n_step: int = 3
    double_q: bool = True
    # advantage learning (Bellemare et al. 2016): the target is lowered by this times the
    # taken action's gap to the best under the target network, which widens small gaps
    # between actions; 0 is plain DQN
    advantage_learning: float = 0.0
    dueling: bool = False
    huber_delta: float = 10.0
    target_update_period: int = 1  # gradient steps between target updates
    tau: float = 0.01  # 1.0: copy; < 1: Polyak averaging at every target update
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.25  # of total_steps
    # "schedule": every env anneals from epsilon_start to epsilon_end; "apex": env i of N keeps
    # epsilon apex_base ** (1 + apex_alpha * i / (N - 1)) for the whole run (Horgan et al. 2018)
    exploration: str = "schedule"
    apex_base: float = 0.4
    apex_alpha: float = 7.0
    prioritized: bool = False
    priority_alpha: float = 0.6
    priority_beta_start: float = 0.4  # annealed to 1 over training
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    torso: str = "mlp"  # or "nature_cnn" (stacked frames, e.g. Atari), "grid_cnn" (MinAtar)
    normalize_obs: bool = False

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps",
                       "updates_per_iteration", "batch_size", "n_step", "target_update_period")
        check_budget(self)
        if self.buffer_size < self.num_envs * self.n_step:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must hold at least n_step steps of every env"
            )
        check_at_least(self, 0, "learning_starts")
        check_positive(self, "learning_rate", "max_grad_norm", "huber_delta", "tau")
        check_unit_interval(self, "gamma", "tau", "final_lr_fraction", "epsilon_start",
                            "epsilon_end", "exploration_fraction", "priority_alpha",
                            "priority_beta_start", "advantage_learning")
        check_choice(self, "exploration", EXPLORATIONS)
        check_open_unit_interval(self, "apex_base")
        check_at_least(self, 0, "apex_alpha")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "torso", TORSOS)
        check_layer_widths(self, "hidden")
