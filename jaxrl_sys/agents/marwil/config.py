"""MARWIL's hyper-parameters (BC is MARWIL with `beta` 0): the offline family's dataset,
shards and gradient steps, and the advantage weighting."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.offline import OfflineConfig
from jaxrl_sys.core.config import (
    ConfigError, check_choice, check_layer_widths, check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class Config(OfflineConfig):
    """MARWIL (Wang et al. 2018) on a recorded dataset (the shared fields:
    `families.offline.OfflineConfig`)."""

    hidden: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    # the advantage's weight in exp(beta * A / c); 0 is behaviour cloning (no value network)
    beta: float = 1.0
    value_loss_weight: float = 1.0
    # c^2, the moving average of the squared advantage: its first value and its update rate
    adv_norm_start: float = 100.0
    adv_norm_rate: float = 1e-3
    max_weight: float = 20.0  # exp(beta * A / c) is clipped here (one row cannot dominate)

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        self.validate_offline()
        if self.online_rollout:
            raise ConfigError("marwil and bc learn from the dataset alone (online_rollout=0); "
                              "offline-to-online fine-tuning is iql's and cql's")
        check_positive(self, "adv_norm_start", "max_weight")
        check_unit_interval(self, "adv_norm_rate")
        if self.beta < 0 or self.value_loss_weight < 0:
            raise ConfigError("beta and value_loss_weight must be at least 0")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
