"""MADDPG's hyper-parameters (`Config`): the continuous-control family's replay, warm-up and
targets with MADDPG's own (Lowe et al. 2017), and their checks."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.continuous_control import ContinuousControlConfig
from jaxrl_sys.agents.families.teams import check_policy_fields
from jaxrl_sys.core.config import ConfigError, check_at_least, check_positive


@dataclasses.dataclass(frozen=True)
class Config(ContinuousControlConfig):
    """MADDPG hyper-parameters: decentralised actors over each agent's observation, a
    centralised critic per agent over the world state and every agent's action, discrete
    actions relaxed by Gumbel-softmax in the actor's gradient, continuous ones deterministic
    with Gaussian exploration noise. The defaults are the MPE
    settings of the MADDPG paper where they fit the device loop (64-wide MLPs, gamma 0.95,
    tau 0.01, batch 1024, gradient norm 0.5) with 64 envs; other envs' values are in
    defaults.py."""

    total_steps: int = 1_000_000
    num_envs: int = 64
    rollout_steps: int = 8
    buffer_size: int = 131_072
    batch_size: int = 1024
    learning_starts: int = 16_384
    gamma: float = 0.95
    tau: float = 0.01
    actor_learning_rate: float = 1e-3
    critic_learning_rate: float = 1e-3
    hidden: tuple[int, ...] = (64, 64)
    max_grad_norm: float = 0.5  # each network's gradient norm, clipped
    gumbel_temperature: float = 1.0  # discrete: of the actor's relaxed action in its gradient
    # times the mean squared logit (discrete) or action in [-1, 1] (continuous), in the
    # actor's loss
    logit_penalty: float = 1e-3
    exploration_noise: float = 0.1  # continuous: Gaussian acting noise (in [-1, 1] units)
    policies: str = "shared"  # or "by_team": an actor and critics per competing team
    frozen_teams: tuple[str, ...] = ()  # by_team: teams whose policy stays at its initialisation

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        check_positive(self, "max_grad_norm", "gumbel_temperature")
        check_at_least(self, 0, "logit_penalty", "exploration_noise")
        check_policy_fields(self)
        if self.noise_correlation:
            raise ConfigError("maddpg explores with white noise (noise_correlation=0)")
        if self.normalize_obs:
            raise ConfigError("maddpg does not normalise observations (normalize_obs=false)")
