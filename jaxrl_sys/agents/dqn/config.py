"""DQN's hyper-parameters: the Q-learning family's config with DQN's own fields and checks."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.q_learning import ApeXQConfig
from jaxrl_sys.core.config import ConfigError, check_at_least, check_unit_interval


@dataclasses.dataclass(frozen=True)
class Config(ApeXQConfig):
    """DQN hyper-parameters; the defaults solve CartPole-v1 (greedy evaluation).

    Short n-step returns need the Huber loss to be close to squared error (returns run to the
    hundreds; with delta 1 the gradient is sign-only) and more, smoothed target updates: the
    defaults take 4 gradient steps per 32 env steps and a Polyak target.
    """

    rollout_steps: int = 1  # vectorised env steps per iteration
    # advantage learning (Bellemare et al. 2016): the target is lowered by this times the
    # taken action's gap to the best under the target network, which widens small gaps
    # between actions; 0 is plain DQN
    advantage_learning: float = 0.0
    normalize_obs: bool = False

    @property
    def warmup_steps(self) -> int:
        """Env steps before the first gradient step: `learning_starts`, and at least `n_step`
        steps of every env (the first n-step targets)."""
        return max(self.learning_starts, self.n_step * self.num_envs)

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "rollout_steps")
        super().validate()
        if self.buffer_size < self.num_envs * self.n_step:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must hold at least n_step steps of every env"
            )
        check_unit_interval(self, "advantage_learning")
