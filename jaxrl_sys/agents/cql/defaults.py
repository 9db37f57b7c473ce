"""CQL's shipped configs, as data (`Config`'s defaults for every env: an offline agent's
settings belong to its dataset more than to its env), and its learning promises, each with
the dataset its check records first."""

from __future__ import annotations

from jaxrl_sys.agents.cql.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import DatasetRecipe, LearningPromise

TUNED: tuple[Tuned, ...] = ()

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, dataset=DatasetRecipe("ppo", "epsilon:0.3", 20)),
)


def default_config(env_name: str) -> Config:
    """The CQL config for `env_name`: `Config`'s defaults."""
    return tuned_config(Config(), TUNED, env_name)
