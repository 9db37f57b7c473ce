"""Soft Actor-Critic: tanh-squashed Gaussian policy, twin critics, automatic entropy tuning.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `sac`:
agent.py binds them (`make`), losses.py holds the losses, defaults.py the per-env defaults
and the envs they are promised to learn (`PROMISES`)."""

from jaxrl_sys.agents.sac.agent import (
    Agent,
    greedy_action,
    make,
    placement_problem,
)
from jaxrl_sys.agents.sac.host import host_config_problem, host_fns
from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.agents.sac.defaults import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    PROMISES,
    TUNED,
    default_config,
)
from jaxrl_sys.agents.sac.distributions import (
    tanh_gaussian_log_prob,
    tanh_gaussian_sample,
    tanh_log_det_jacobian,
)
from jaxrl_sys.agents.families.continuous_control import Critic, correlated_noise, mean_over_learned
from jaxrl_sys.agents.sac.losses import actor_loss, alpha_loss, critic_loss, sac_loss, soft_target
from jaxrl_sys.agents.sac.networks import LOG_STD_MAX, LOG_STD_MIN, Actor
from jaxrl_sys.agents.sac.types import EnvState, Params, State, Trainable

__all__ = [
    'DEFAULT_ENV',
    'LOG_STD_MIN',
    'LOG_STD_MAX',
    'Config',
    'default_config',
    'TUNED',
    'PROMISES',
    'tanh_log_det_jacobian',
    'tanh_gaussian_log_prob',
    'tanh_gaussian_sample',
    'correlated_noise',
    'soft_target',
    'critic_loss',
    'actor_loss',
    'alpha_loss',
    'sac_loss',
    'Actor',
    'Critic',
    'Params',
    'Trainable',
    'State',
    'EnvState',
    'Agent',
    'mean_over_learned',
    'make',
    'placement_problem',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'host_config_problem',
    'host_fns',
]
