"""SAC's hyper-parameters (`Config`): the continuous-control family's with SAC's own
(temperature, target entropy, reward scale), and their checks."""

from __future__ import annotations

import dataclasses
from typing import Optional

from jaxrl_sys.agents.families.continuous_control import ContinuousControlConfig
from jaxrl_sys.core.config import check_positive


@dataclasses.dataclass(frozen=True)
class Config(ContinuousControlConfig):
    """SAC hyper-parameters; the defaults solve Pendulum-v1, other envs' tuned values are in
    defaults.py (see `default_config`)."""

    alpha_learning_rate: float = 1e-3
    initial_alpha: float = 0.1
    target_entropy: Optional[float] = None  # None: -action_dim
    reward_scale: float = 1.0

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        check_positive(self, "alpha_learning_rate", "initial_alpha", "reward_scale")
