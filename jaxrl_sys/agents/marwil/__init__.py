"""MARWIL (and behaviour cloning, `bc`: beta 0) on a recorded dataset held on device.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the losses (losses.py) and the shipped
configs (defaults.py) of `marwil`; see agent.py."""

from jaxrl_sys.agents.marwil.agent import (
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
    policy_action,
    update,
)
from jaxrl_sys.agents.marwil.config import Config
from jaxrl_sys.agents.marwil.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.marwil.losses import (
    action_log_probs, advantage_weights, marwil_loss, updated_adv_norm,
)  # action_log_probs: the offline family's, which the loss uses
from jaxrl_sys.agents.marwil.networks import PolicyNetwork, ValueNetwork, build_networks

__all__ = [
    "DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
    "Agent", "Config", "PolicyNetwork", "State", "ValueNetwork",
    "action_log_probs", "advantage_weights", "build_networks", "default_config",
    "greedy_action", "init", "make", "marwil_loss", "placement_problem", "policy_action",
    "update", "updated_adv_norm",
]
