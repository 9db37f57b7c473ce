"""PQN: parallel Q-learning without replay or target network (Gallici et al. 2024).

The agent contract (`jaxrl_sys.core.types.AgentDef`), the targets and loss (losses.py) and
the shipped per-env configs and learning promises (defaults.py) of `pqn`; see agent.py."""

from jaxrl_sys.agents.pqn.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    Batch,
    State,
    Trajectory,
    collect,
    greedy_action,
    init,
    make,
    max_q,
    placement_problem,
    update,
)
from jaxrl_sys.agents.pqn.config import Config
from jaxrl_sys.agents.pqn.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.pqn.host import host_config_problem, host_fns
from jaxrl_sys.agents.pqn.losses import q_lambda_targets, q_loss
from jaxrl_sys.agents.pqn.networks import NormedQNetwork, build_network

__all__ = [
    "DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
    "Agent", "Batch", "Config", "NormedQNetwork", "State", "Trajectory",
    "build_network", "collect", "default_config", "greedy_action", "host_config_problem",
    "host_fns", "init", "make", "max_q", "placement_problem", "q_lambda_targets", "q_loss",
    "update",
]
