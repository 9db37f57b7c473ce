"""Implicit Q-learning (IQL) on a recorded dataset held on device.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the losses (losses.py) and the shipped
configs (defaults.py) of `iql`; see agent.py."""

from jaxrl_sys.agents.iql.agent import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    State,
    greedy_action,
    init,
    iql_loss,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.iql.config import Config
from jaxrl_sys.agents.iql.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.iql.losses import (
    awr_policy_loss, critic_targets, expectile_loss, twin_critic_loss,
)
from jaxrl_sys.agents.iql.networks import ActionValues, TwinCritics, build

__all__ = [
    "DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
    "ActionValues", "Agent", "Config", "State", "TwinCritics",
    "awr_policy_loss", "build", "critic_targets", "default_config", "expectile_loss",
    "greedy_action", "init", "iql_loss", "make", "placement_problem", "twin_critic_loss",
    "update",
]
