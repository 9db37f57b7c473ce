"""MAPPO's and IPPO's hyper-parameters: the family's clipped-PPO config with their own
defaults, plus the critic's input."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.policy_gradient import ClippedPPOConfig
from jaxrl_sys.agents.families.teams import check_policy_fields
from jaxrl_sys.core.config import check_choice

CRITICS = ("central", "local")  # MAPPO: the world state; IPPO: the agent's own observation


@dataclasses.dataclass(frozen=True)
class Config(ClippedPPOConfig):
    """MAPPO/IPPO hyper-parameters: PPO's, with their own defaults (which learn MPE
    simple_spread; per-env ones: defaults.py), plus the critic's input."""

    total_steps: int = 5_000_000
    num_envs: int = 64
    rollout_steps: int = 128
    ent_coef: float = 0.01
    hidden: tuple[int, ...] = (64, 64)
    memory_size: int = 64
    critic: str = "central"  # or "local" (IPPO)
    policies: str = "shared"  # or "by_team": a policy per competing team
    frozen_teams: tuple[str, ...] = ()  # by_team: teams whose policy stays at its initialisation

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        check_choice(self, "critic", CRITICS)
        check_policy_fields(self)
