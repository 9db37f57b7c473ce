"""MADDPG (Lowe et al. 2017): decentralised actors and centralised critics for a team, with
discrete actions learned off-policy through the Gumbel-softmax or continuous ones by the
deterministic policy gradient.

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `maddpg`:
config.py (Config), networks.py (the team actor and the centralised critics), losses.py (the
Gumbel sampling, the critics' target and the loss), defaults.py (the shipped per-env defaults
and the learning promises), agent.py (`make` and the rest)."""

from jaxrl_sys.agents.maddpg.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    EnvState,
    Params,
    State,
    act,
    greedy_action,
    init,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.maddpg.config import Config
from jaxrl_sys.agents.maddpg.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.maddpg.losses import (
    Targets,
    Trainable,
    critic_regression,
    critic_target,
    deterministic_maddpg_loss,
    each_agents_joint,
    gumbel_max_actions,
    maddpg_loss,
    straight_through_gumbel_softmax,
)
from jaxrl_sys.agents.maddpg.networks import CentralCritics, TeamActor

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'default_config',
    'TUNED',
    'PROMISES',
    'TeamActor',
    'CentralCritics',
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
    'gumbel_max_actions',
    'straight_through_gumbel_softmax',
    'each_agents_joint',
    'critic_target',
    'critic_regression',
    'maddpg_loss',
    'deterministic_maddpg_loss',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
]
