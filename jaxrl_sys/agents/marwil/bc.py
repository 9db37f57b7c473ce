"""Behaviour cloning: MARWIL with beta 0, every row weighted 1 and no value network trained;
the policy maximises the log-likelihood of the dataset's actions. Registered as `bc`."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.marwil.agent import (  # noqa: F401  (the agent contract, re-exported)
    DEFAULT_ENV, DEFAULT_EVAL_EPISODES, MEMORY, PLAYS, greedy_action, make, placement_problem,
)
from jaxrl_sys.agents.marwil.defaults import TUNED
from jaxrl_sys.agents.marwil.defaults import default_config as marwil_config
from jaxrl_sys.agents.marwil.config import Config
from jaxrl_sys.core.types import DatasetRecipe, LearningPromise

# behaviour cloning of PPO's greedy CartPole policy (20 episodes of 500 steps)
PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, dataset=DatasetRecipe("ppo", "greedy", 20)),
)


def default_config(env_name: str) -> Config:
    """MARWIL's config for `env_name` with beta 0."""
    return dataclasses.replace(marwil_config(env_name), beta=0.0)


__all__ = ["DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
           "Config", "default_config", "greedy_action", "make", "placement_problem"]
