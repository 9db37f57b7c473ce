"""IMPALA: actor-critic learning from V-trace targets, discrete and Gaussian actions.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the target and loss functions
(losses.py) and the shipped per-env configs and learning promises (defaults.py) of `impala`;
see agent.py."""

from jaxrl_sys.agents.impala.agent import (
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
from jaxrl_sys.agents.impala.host import host_config_problem, host_fns
from jaxrl_sys.agents.impala.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.impala.losses import (
    entropy_term,
    impala_loss,
    importance_weights,
    policy_gradient_loss,
    value_loss,
    vtrace,
)
from jaxrl_sys.agents.impala.networks import build_network

__all__ = [
    'DEFAULT_ENV',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'Agent',
    'Config',
    'PROMISES',
    'State',
    'TUNED',
    'Trajectory',
    'build_network',
    'build_optimizer',
    'default_config',
    'entropy_term',
    'greedy_action',
    'host_config_problem',
    'host_fns',
    'placement_problem',
    'impala_loss',
    'importance_weights',
    'init',
    'make',
    'policy_gradient_loss',
    'value_loss',
    'vtrace',
]
