"""TD3 (Fujimoto et al. 2018) and DDPG: deterministic policies with Gaussian exploration noise
(or Ape-X's per-env scales), critics from replay, the deterministic policy gradient.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `td3`:
config.py (Config), networks.py (the actor), losses.py (targets and losses), defaults.py (the
shipped per-env defaults and the learning promises), agent.py (`make` and the rest), host.py
(the host loop's functions). This package is the `td3` agent; ddpg.py is the `ddpg` agent."""

from jaxrl_sys.agents.td3.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    EnvState,
    Params,
    State,
    act,
    exploration_scales,
    greedy_action,
    init,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.td3.config import Config
from jaxrl_sys.agents.td3.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.td3.host import host_config_problem, host_fns
from jaxrl_sys.agents.td3.losses import (
    Targets,
    Trainable,
    actor_loss,
    critic_loss,
    critic_target,
    smoothed_actions,
    td3_loss,
)
from jaxrl_sys.agents.td3.networks import DeterministicActor

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'default_config',
    'TUNED',
    'PROMISES',
    'DeterministicActor',
    'Params',
    'State',
    'EnvState',
    'Trainable',
    'Targets',
    'Agent',
    'init',
    'act',
    'update',
    'make',
    'greedy_action',
    'placement_problem',
    'exploration_scales',
    'smoothed_actions',
    'critic_target',
    'critic_loss',
    'actor_loss',
    'td3_loss',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'host_config_problem',
    'host_fns',
]
