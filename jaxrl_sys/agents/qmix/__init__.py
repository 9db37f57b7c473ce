"""QMIX: value decomposition with a monotonic mixing network conditioned on the world state
(Rashid et al. 2018), on JaxMARL's cooperative envs; VDN is the same agent with the team's
Q-value the sum of the agents' (`mixer="vdn"`, the `vdn` agent, `jaxrl_sys.agents.qmix.vdn`).

The agent contract (`jaxrl_sys.core.types.AgentDef`): config.py (Config), networks.py (the
agents' shared Q-network, the mixer, masked acting), losses.py (double-Q team targets and the
loss), defaults.py (shipped per-env defaults and the learning promises), agent.py (`make` and
the rest)."""

from jaxrl_sys.agents.qmix.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    EnvState,
    State,
    act,
    add_items,
    build_mixer,
    build_network,
    build_optimizer,
    collect,
    greedy_action,
    init,
    learn,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.qmix.config import MIXERS, Config
from jaxrl_sys.agents.qmix.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.qmix.losses import (
    Batch,
    double_q_next_values,
    qmix_loss,
    taken_q,
    team_targets,
)
from jaxrl_sys.agents.qmix.networks import (
    MonotonicMixer,
    TeamQNetwork,
    epsilon_greedy,
    masked_argmax,
    mix,
    next_team_q,
    team_memory,
    team_q,
    unroll,
)

__all__ = [
    'DEFAULT_ENV', 'DEFAULT_EVAL_EPISODES', 'MIXERS', 'PROMISES', 'MEMORY', 'PLAYS',
    'TUNED', 'Agent', 'Batch', 'Config', 'EnvState', 'MonotonicMixer', 'State', 'TeamQNetwork',
    'act', 'add_items', 'build_mixer', 'build_network', 'build_optimizer', 'collect',
    'default_config', 'double_q_next_values', 'epsilon_greedy',
    'greedy_action', 'init', 'learn', 'make', 'masked_argmax', 'mix',
    'next_team_q', 'placement_problem', 'qmix_loss', 'taken_q', 'team_memory', 'team_q',
    'team_targets', 'unroll', 'update',
]
