"""R2D2's hyper-parameters and the checks that reject values which cannot work."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_open_unit_interval, check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS, MEMORIES, TORSOS

EXPLORATIONS = ("schedule", "apex")  # annealed epsilon for all envs, or Ape-X's fixed per env
RECURRENT = tuple(m for m in MEMORIES if m != "none")  # R2D2's core is always recurrent


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """R2D2 hyper-parameters; the defaults learn MemoryChain-bsuite (greedy evaluation).

    One iteration steps every env `seq_length` times and stores one replay item per env: the
    `burn_in` steps before them (replayed only to warm the recurrent state) and those
    `seq_length` steps (learned from), with the state before the item's first step.
    """

    total_steps: int = 500_000
    num_envs: int = 32
    seq_length: int = 16  # steps per env per iteration, and the learned steps of an item
    burn_in: int = 8  # earlier steps per item that only warm the state (no gradient)
    updates_per_iteration: int = 2  # gradient steps per iteration
    buffer_size: int = 2_048  # replay items (sequences) per seed, over all envs
    batch_size: int = 32  # sequences, global, split over devices
    learning_starts: int = 5_000  # env steps per seed before learning
    learning_rate: float = 1e-3
    anneal_lr: bool = False  # linearly to learning_rate * final_lr_fraction over learner steps
    final_lr_fraction: float = 0.0
    max_grad_norm: float = 10.0
    gamma: float = 0.99
    n_step: int = 3
    double_q: bool = True
    dueling: bool = False
    huber_delta: float = 1.0
    target_update_period: int = 1  # gradient steps between target updates
    tau: float = 0.01  # 1.0: copy; < 1: Polyak averaging at every target update
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.25  # of total_steps
    # "schedule": every env anneals from epsilon_start to epsilon_end; "apex": env i of N keeps
    # epsilon apex_base ** (1 + apex_alpha * i / (N - 1)) for the whole run (R2D2's actors)
    exploration: str = "schedule"
    apex_base: float = 0.4
    apex_alpha: float = 7.0
    # prioritised sequences: priority eta * max |TD| + (1 - eta) * mean |TD| over the item
    prioritized: bool = False
    priority_alpha: float = 0.9
    priority_beta_start: float = 0.6  # annealed to 1 over training
    priority_eta: float = 0.9
    hidden: tuple[int, ...] = (64,)  # the torso's widths; the last is also the post-core layer
    activation: str = "relu"
    torso: str = "mlp"  # or "nature_cnn" (stacked frames), "grid_cnn" (MinAtar)
    memory: str = "gru"  # or "lstm"
    memory_size: int = 64  # units of the recurrent core

    @property
    def rollout_steps(self) -> int:
        """Steps per env per iteration (`RolloutBudget`'s name for `seq_length`)."""
        return self.seq_length

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "seq_length",
                       "updates_per_iteration", "batch_size", "n_step", "target_update_period",
                       "memory_size")
        check_at_least(self, 0, "burn_in", "learning_starts")
        check_budget(self)
        if self.burn_in > self.seq_length:
            raise ConfigError(f"burn_in={self.burn_in} must be <= seq_length={self.seq_length} "
                              "(the burn-in steps are the previous iteration's last ones)")
        if self.n_step > self.seq_length:
            raise ConfigError(f"n_step={self.n_step} must be <= seq_length={self.seq_length} "
                              "(n-step targets are taken inside a sequence)")
        if self.buffer_size < self.num_envs:
            raise ConfigError(f"buffer_size={self.buffer_size} must hold at least one sequence "
                              f"of each of the num_envs={self.num_envs} envs")
        check_positive(self, "learning_rate", "max_grad_norm", "huber_delta", "tau")
        check_unit_interval(self, "gamma", "tau", "final_lr_fraction", "epsilon_start",
                            "epsilon_end", "exploration_fraction", "priority_alpha",
                            "priority_beta_start", "priority_eta")
        check_choice(self, "exploration", EXPLORATIONS)
        check_open_unit_interval(self, "apex_base")
        check_at_least(self, 0, "apex_alpha")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "torso", TORSOS)
        check_layer_widths(self, "hidden")
        check_choice(self, "memory", RECURRENT)
