"""SAC's actor (mean and log-std of the pre-squash Gaussian), the off-policy actor-critic
family's (`families.soft_actor`); its twin critics are the continuous-control family's
(`families.continuous_control.Critic`)."""

from jaxrl_sys.agents.families.soft_actor import (  # noqa: F401  (SAC's actor)
    LOG_STD_MAX, LOG_STD_MIN, Actor,
)

__all__ = ["LOG_STD_MAX", "LOG_STD_MIN", "Actor"]
