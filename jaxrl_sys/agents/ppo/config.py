"""PPO's hyper-parameters: the family's clipped-PPO config plus PPO's own fields, among them
the objective and targets that make it A2C or REINFORCE (the `a2c` and `pg` agents)."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.policy_gradient import ClippedPPOConfig
from jaxrl_sys.core.config import ConfigError, check_choice
from jaxrl_sys.core.networks import TORSOS


OBJECTIVES = ("clip", "vanilla")
TARGETS = ("gae", "episode")


@dataclasses.dataclass(frozen=True)
class Config(ClippedPPOConfig):
    """PPO hyper-parameters; the defaults solve CartPole-v1 (per-env ones: defaults.py)."""

    torso: str = "mlp"  # or "nature_cnn" (Atari frames), "grid_cnn" (MinAtar): shared by both heads
    normalize_obs: bool = False
    vtrace: bool = False  # APPO: V-trace targets with the current policy (agent.py's doc)
    # "clip": PPO's clipped surrogate; "vanilla": the unclipped policy gradient (a2c, pg)
    objective: str = "clip"
    # "gae": GAE's (or V-trace's) targets; "episode": REINFORCE's whole-episode returns, the
    # steps whose episode runs past the rollout's end left out (pg)
    targets: str = "gae"

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        super().validate()
        if not isinstance(self.vtrace, bool):
            raise ConfigError(f"vtrace must be true or false, got {self.vtrace!r}")
        check_choice(self, "torso", TORSOS)
        check_choice(self, "objective", OBJECTIVES)
        check_choice(self, "targets", TARGETS)
        if self.targets == "episode" and (self.vtrace or self.memory != "none"):
            raise ConfigError("targets=episode (whole-episode returns) takes vtrace=false and "
                              "memory=none")
