"""DQN with double Q-learning, n-step returns, target network, optional dueling head,
prioritised replay and advantage learning.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `dqn`:
config.py (Config), networks.py (QNetwork), losses.py (targets and loss), defaults.py (the
shipped per-env defaults and the learning promises), agent.py (`make` and the rest)."""

from jaxrl_sys.agents.dqn.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    EnvState,
    State,
    absorb,
    act,
    collect,
    greedy_action,
    init,
    learn,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.agents.dqn.host import host_config_problem, host_fns
from jaxrl_sys.agents.dqn.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.dqn.losses import (
    Batch,
    action_gap,
    advantage_learning_targets,
    bootstrap_observations,
    bootstrap_values,
    q_learning_loss,
    q_targets,
    taken_values,
    td_loss,
)
from jaxrl_sys.agents.dqn.networks import QNetwork, build_network

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'default_config',
    'TUNED',
    'PROMISES',
    'QNetwork',
    'State',
    'EnvState',
    'Batch',
    'Agent',
    'build_network',
    'placement_problem',
    'init',
    'act',
    'collect',
    'learn',
    'absorb',
    'update',
    'make',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'host_config_problem',
    'host_fns',
    'taken_values',
    'bootstrap_observations',
    'bootstrap_values',
    'q_targets',
    'action_gap',
    'advantage_learning_targets',
    'td_loss',
    'q_learning_loss',
]
