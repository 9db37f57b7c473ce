"""IQL's hyper-parameters: the offline family's dataset, shards and gradient steps, the
expectile of the value regression and the temperature of the policy's extraction."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.offline import OfflineConfig
from jaxrl_sys.core.config import (
    ConfigError, check_choice, check_layer_widths, check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class Config(OfflineConfig):
    """Implicit Q-learning (Kostrikov et al. 2022) on a recorded dataset; the defaults are the
    paper's locomotion settings (the shared fields: `families.offline.OfflineConfig`)."""

    learning_rate: float = 3e-4
    hidden: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    expectile: float = 0.7  # tau: V(s) regresses on the tau-expectile of Q(s, a) over the data
    temperature: float = 3.0  # beta: the policy's weights exp(beta * (Q - V))
    max_weight: float = 100.0  # the weights are clipped here
    tau: float = 0.005  # Polyak rate of the target critics

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        self.validate_offline()
        check_unit_interval(self, "expectile", "tau")
        if not 0.0 < self.expectile < 1.0:
            raise ConfigError(f"expectile must be in (0, 1), got {self.expectile}")
        if self.temperature < 0:
            raise ConfigError(f"temperature must be at least 0, got {self.temperature}")
        check_positive(self, "max_weight")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
