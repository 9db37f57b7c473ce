"""TD3's hyper-parameters (`Config`), DDPG's as a setting of them: the continuous-control
family's with TD3's own, and their checks."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.continuous_control import ContinuousControlConfig
from jaxrl_sys.core.config import check_at_least, check_choice, check_open_unit_interval

# "fixed": every env explores with `exploration_noise`; "apex": env i of N keeps the scale
# apex_base ** (1 + apex_alpha * i / (N - 1)) for the whole run (Ape-X DDPG's per-actor noise)
EXPLORATIONS = ("fixed", "apex")


@dataclasses.dataclass(frozen=True)
class Config(ContinuousControlConfig):
    """TD3 hyper-parameters (Fujimoto et al. 2018): clipped double-Q over twin critics, actor
    and targets updated every `policy_delay` critic steps, target policy smoothing; DDPG is
    `twin_critics=False, policy_delay=1, policy_noise=0` (the `ddpg` agent's defaults). The
    defaults solve Pendulum-v1; other envs' tuned values are in defaults.py."""

    total_steps: int = 50_000
    tau: float = 0.005  # Polyak rate of the target actor and critics
    actor_learning_rate: float = 1e-3
    critic_learning_rate: float = 1e-3
    twin_critics: bool = True  # clipped double-Q: the target is the smaller of two critics
    policy_delay: int = 2  # critic updates per actor and target update
    policy_noise: float = 0.2  # target policy smoothing's noise (in [-1, 1] action units)
    noise_clip: float = 0.5  # and its clip
    exploration_noise: float = 0.1  # Gaussian acting noise (in [-1, 1] action units)
    exploration: str = "fixed"
    # LayerNorm in TD3's critics: without it 2 of 16 Pendulum seeds collapsed late
    # (docs/notes/td3.md); DDPG keeps plain critics
    critic_layer_norm: bool = True
    # greedy play (evaluation, serving, recording) with the Polyak-averaged target actor, whose
    # parameters trail the actor's by about 1/tau actor steps and so skip its last wobbles;
    # DDPG plays with its actor
    greedy_target_actor: bool = True
    apex_base: float = 0.4
    apex_alpha: float = 7.0

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        check_at_least(self, 1, "policy_delay")
        check_at_least(self, 0, "policy_noise", "noise_clip", "exploration_noise", "apex_alpha")
        check_choice(self, "exploration", EXPLORATIONS)
        check_open_unit_interval(self, "apex_base")
