"""MARWIL's hyper-parameters (BC is MARWIL with `beta` 0): the dataset, its shards, the
gradient steps and the advantage weighting."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """MARWIL (Wang et al. 2018) on a recorded dataset. A step is a gradient step: one
    iteration takes `updates_per_iteration` of them, and `total_steps` counts them; no env
    is stepped in training (greedy evaluation plays the env the run names)."""

    dataset: str = ""  # a Minari dataset directory, or a dataset id under MINARI_DATASETS_PATH
    total_steps: int = 20_000  # gradient steps
    updates_per_iteration: int = 100
    # the dataset's rows are dealt round-robin to this many shards, split over devices; each
    # shard samples its share of every batch from its own rows
    shards: int = 8
    batch_size: int = 256  # global, split over the shards
    learning_rate: float = 1e-3
    max_grad_norm: float = 10.0
    hidden: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    # the advantage's weight in exp(beta * A / c); 0 is behaviour cloning (no value network)
    beta: float = 1.0
    gamma: float = 0.99  # the discount of the returns-to-go the value network regresses on
    value_loss_weight: float = 1.0
    # c^2, the moving average of the squared advantage: its first value and its update rate
    adv_norm_start: float = 100.0
    adv_norm_rate: float = 1e-3
    max_weight: float = 20.0  # exp(beta * A / c) is clipped here (one row cannot dominate)

    @property
    def num_envs(self) -> int:
        """The dataset's shards stand where an online agent's envs are (split over devices)."""
        return self.shards

    @property
    def rollout_steps(self) -> int:
        """Gradient steps per iteration (an iteration's length, as an online agent's
        rollout)."""
        return self.updates_per_iteration

    @property
    def steps_per_iteration(self) -> int:
        """Steps one iteration counts: its gradient steps."""
        return self.updates_per_iteration

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "updates_per_iteration", "shards", "batch_size")
        check_budget(self)
        if self.batch_size % self.shards:
            raise ConfigError(f"batch_size={self.batch_size} does not divide over "
                              f"shards={self.shards}")
        check_positive(self, "learning_rate", "max_grad_norm", "adv_norm_start", "max_weight")
        check_unit_interval(self, "gamma", "adv_norm_rate")
        if self.beta < 0 or self.value_loss_weight < 0:
            raise ConfigError("beta and value_loss_weight must be at least 0")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
