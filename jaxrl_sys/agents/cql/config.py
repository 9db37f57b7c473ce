"""CQL's hyper-parameters: the offline family's dataset, shards and gradient steps, the
Q-learning target and the conservative penalty's weight."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.offline import OfflineConfig
from jaxrl_sys.core.config import ConfigError, check_at_least, check_choice, check_layer_widths
from jaxrl_sys.core.networks import ACTIVATIONS


@dataclasses.dataclass(frozen=True)
class Config(OfflineConfig):
    """Conservative Q-learning (Kumar et al. 2020): on DQN's Q-learning for discrete actions,
    on SAC for continuous ones (the shared fields: `families.offline.OfflineConfig`)."""

    learning_rate: float = 3e-4
    hidden: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    # alpha: the weight of E[logsumexp_a Q(s, a) - Q(s, a_data)], which pushes down the Q of
    # actions the data did not take
    cql_alpha: float = 1.0
    # discrete actions: DQN's target network and double Q
    target_update_period: int = 500  # gradient steps between copies to the target network
    double_q: bool = True  # the online network picks the next action, the target values it
    # continuous actions: SAC's Polyak targets, and the actions sampled per state of each kind
    # (uniform, the policy's at s, the policy's at s') for the penalty's logsumexp
    tau: float = 0.005
    cql_samples: int = 10
    backup_entropy: bool = False  # the critics' target with SAC's -alpha log pi term
    # online fine-tuning with discrete actions: the epsilon of the shards' epsilon-greedy envs
    online_epsilon: float = 0.05

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        self.validate_offline()
        if self.cql_alpha < 0:
            raise ConfigError(f"cql_alpha must be at least 0, got {self.cql_alpha}")
        check_at_least(self, 1, "target_update_period", "cql_samples")
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError(f"tau must be in (0, 1], got {self.tau}")
        if not 0.0 <= self.online_epsilon <= 1.0:
            raise ConfigError(f"online_epsilon must be in [0, 1], got {self.online_epsilon}")
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
