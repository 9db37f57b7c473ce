"""DQN with double Q-learning, n-step returns, target network, optional dueling head and

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of
`dqn`; see agent.py."""

from jaxrl_sys.agents.dqn.agent import (
    DEFAULT_ENV,
    Config,
    default_config,
    QNetwork,
    State,
    EnvState,
    Batch,
    Agent,
    build_network,
    build_optimizer,
    init,
    epsilon_at,
    make,
    greedy_action,
    DEFAULT_EVAL_EPISODES,
    host_fns,
)

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'default_config',
    'QNetwork',
    'State',
    'EnvState',
    'Batch',
    'Agent',
    'build_network',
    'build_optimizer',
    'init',
    'epsilon_at',
    'make',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'host_fns',
]
