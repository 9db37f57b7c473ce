"""Proximal Policy Optimisation (clipped objective, GAE), discrete and Gaussian actions.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of
`ppo`; see agent.py."""

from jaxrl_sys.agents.ppo.agent import (
    DEFAULT_ENV,
    Config,
    MINATAR_GAMES,
    default_config,
    State,
    Trajectory,
    Agent,
    build_network,
    build_optimizer,
    init,
    make,
    greedy_action,
    DEFAULT_EVAL_EPISODES,
    host_fns,
)

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'MINATAR_GAMES',
    'default_config',
    'State',
    'Trajectory',
    'Agent',
    'build_network',
    'build_optimizer',
    'init',
    'make',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'host_fns',
]
