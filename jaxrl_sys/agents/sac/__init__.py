"""Soft Actor-Critic: tanh-squashed Gaussian policy, twin critics, automatic entropy tuning.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of
`sac`; see agent.py."""

from jaxrl_sys.agents.sac.agent import (
    DEFAULT_ENV,
    LOG_STD_MIN,
    LOG_STD_MAX,
    Config,
    default_config,
    tanh_log_det_jacobian,
    tanh_gaussian_log_prob,
    tanh_gaussian_sample,
    correlated_noise,
    Actor,
    Critic,
    Params,
    Trainable,
    State,
    EnvState,
    Agent,
    mean_over_learned,
    make,
    greedy_action,
    DEFAULT_EVAL_EPISODES,
    host_config_problem,
    host_fns,
)

__all__ = [
    'DEFAULT_ENV',
    'LOG_STD_MIN',
    'LOG_STD_MAX',
    'Config',
    'default_config',
    'tanh_log_det_jacobian',
    'tanh_gaussian_log_prob',
    'tanh_gaussian_sample',
    'correlated_noise',
    'Actor',
    'Critic',
    'Params',
    'Trainable',
    'State',
    'EnvState',
    'Agent',
    'mean_over_learned',
    'make',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'host_config_problem',
    'host_fns',
]
