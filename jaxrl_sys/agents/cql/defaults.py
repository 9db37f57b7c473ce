"""CQL's shipped configs, as data (`Config`'s defaults for every env: an offline agent's
settings belong to its dataset more than to its env), and its learning promises, each with
the dataset its check records first."""

from __future__ import annotations

from jaxrl_sys.agents.cql.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import DatasetRecipe, LearningPromise

# continuous actions: the penalty's weight CORL and JAX-CORL run on D4RL's locomotion tasks
TUNED: tuple[Tuned, ...] = (
    Tuned("Pendulum-v1", dict(cql_alpha=5.0), "not measured: CORL's weight for continuous "
          "actions"),
    Tuned("brax:*", dict(cql_alpha=5.0), "not measured: CORL's weight for continuous actions"),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, dataset=DatasetRecipe("ppo", "epsilon:0.3", 20)),
)


def default_config(env_name: str) -> Config:
    """The CQL config for `env_name`: `Config`'s defaults with its tuned entry's overrides
    (`cql_alpha` 5 for continuous actions)."""
    return tuned_config(Config(), TUNED, env_name)
