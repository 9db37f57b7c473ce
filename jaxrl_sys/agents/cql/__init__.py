"""Conservative Q-learning (CQL) on a recorded dataset held on device: on DQN's Q-learning
for discrete actions, on SAC for continuous ones.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the losses (losses.py) and the shipped
configs (defaults.py) of `cql`; see agent.py."""

from jaxrl_sys.agents.cql.agent import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    State,
    greedy_action,
    init,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.cql.config import Config
from jaxrl_sys.agents.cql.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.cql.losses import (
    conservative_penalty, cql_loss, q_targets, sampled_conservative_penalty,
)
from jaxrl_sys.agents.cql.networks import QNetwork, build_network

__all__ = [
    "DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
    "Agent", "Config", "QNetwork", "State",
    "build_network", "conservative_penalty", "cql_loss", "default_config", "greedy_action",
    "init", "make", "placement_problem", "q_targets", "sampled_conservative_penalty",
    "update",
]
