"""DQN's hyper-parameters: the Q-learning family's config with DQN's own fields and checks."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.q_learning import ApeXQConfig
from jaxrl_sys.core.config import ConfigError, check_at_least, check_choice, check_unit_interval

# one value per action, or C51's, QR-DQN's or IQN's distribution
DISTRIBUTIONAL = ("none", "c51", "qr", "iqn")


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
    # Rainbow's distributional head: C51 (Bellemare et al. 2017: logits on num_atoms atoms
    # evenly spaced from v_min to v_max), QR-DQN (Dabney et al. 2018: num_atoms quantiles) or
    # IQN (Dabney et al. 2018: quantiles at num_atoms sampled fractions, online and target;
    # acting averages num_atoms midpoint fractions)
    distributional: str = "none"
    num_atoms: int = 51
    v_min: float = -10.0
    v_max: float = 10.0
    quantile_kappa: float = 1.0  # QR-DQN's and IQN's Huber threshold (0: plain regression)
    num_cosines: int = 64  # IQN's cosine embedding of a fraction
    # noisy linear Q heads (Fortunato et al. 2018): exploration by their learned noise, drawn
    # per env and step, instead of epsilon (which must then be 0 throughout)
    noisy: bool = False
    # greedy play (evaluation, serving, recording) with the target network: under a Polyak
    # target an average of the online parameters, which skips the last updates' wobbles;
    # under periodic copies the online parameters of the last copy
    greedy_target_network: bool = False

    @property
    def warmup_steps(self) -> int:
        """Env steps before the first gradient step: `learning_starts`, and at least `n_step`
        steps of every env (the first n-step targets)."""
        return max(self.learning_starts, self.n_step * self.num_envs)

    @property
    def support(self) -> tuple[float, ...]:
        """C51's atoms: `num_atoms` values evenly spaced from v_min to v_max (else none)."""
        if self.distributional != "c51":
            return ()
        step = (self.v_max - self.v_min) / (self.num_atoms - 1)
        return tuple(self.v_min + i * step for i in range(self.num_atoms))

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "rollout_steps")
        super().validate()
        if self.buffer_size < self.num_envs * self.n_step:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must hold at least n_step steps of every env"
            )
        check_unit_interval(self, "advantage_learning")
        check_choice(self, "distributional", DISTRIBUTIONAL)
        check_at_least(self, 2, "num_atoms")
        check_at_least(self, 0, "quantile_kappa")
        if self.v_max <= self.v_min:
            raise ConfigError(f"v_max={self.v_max} must be above v_min={self.v_min}")
        check_at_least(self, 1, "num_cosines")
        if self.noisy and (self.epsilon_start or self.epsilon_end or self.exploration != "schedule"):
            raise ConfigError("noisy=True explores by its noise: set epsilon_start=0 and "
                              "epsilon_end=0 with exploration=schedule (as the rainbow "
                              "agent's defaults do)")
        if self.distributional != "none" and self.advantage_learning:
            raise ConfigError("advantage_learning works on one value per action; "
                              f"distributional={self.distributional!r} needs it 0")
