"""Proximal Policy Optimisation (clip, GAE or V-trace), discrete and Gaussian actions.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the loss functions (losses.py) and the
shipped per-env configs and learning promises (defaults.py) of `ppo`; see agent.py."""

from jaxrl_sys.agents.ppo.agent import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    Config,
    State,
    Trajectory,
    build_optimizer,
    greedy_action,
    init,
    make,
    placement_problem,
)
from jaxrl_sys.agents.ppo.host import host_config_problem, host_fns
from jaxrl_sys.agents.ppo.defaults import MINATAR_GAMES, PROMISES, TUNED, default_config
from jaxrl_sys.agents.ppo.losses import (
    approx_kl,
    clipped_policy_loss,
    clipped_value_loss,
    entropy_term,
    importance_ratio,
    normalized_advantages,
    ppo_loss,
    value_loss,
)
from jaxrl_sys.agents.ppo.networks import build_network

__all__ = [
    'DEFAULT_ENV',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'Agent',
    'Config',
    'MINATAR_GAMES',
    'PROMISES',
    'State',
    'TUNED',
    'Trajectory',
    'approx_kl',
    'build_network',
    'build_optimizer',
    'clipped_policy_loss',
    'clipped_value_loss',
    'default_config',
    'entropy_term',
    'greedy_action',
    'host_config_problem',
    'host_fns',
    'importance_ratio',
    'init',
    'make',
    'normalized_advantages',
    'placement_problem',
    'ppo_loss',
    'value_loss',
]
