"""MARWIL's shipped configs, as data. An offline agent's settings belong to its dataset more
than to its env: every env takes `Config`'s defaults, and the dataset is the user's
(`--set dataset=PATH`)."""

from __future__ import annotations

from jaxrl_sys.agents.marwil.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import DatasetRecipe, LearningPromise

TUNED: tuple[Tuned, ...] = ()

# the learning check records each promise's dataset first: PPO's shipped CartPole run, then
# 20 of its episodes with a random action one step in three (its greedy policy scores 500;
# the noisy one about 430)
PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, dataset=DatasetRecipe("ppo", "epsilon:0.3", 20)),
)


def default_config(env_name: str) -> Config:
    """The MARWIL config for `env_name`: `Config`'s defaults."""
    return tuned_config(Config(), TUNED, env_name)
