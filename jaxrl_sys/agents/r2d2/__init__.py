"""R2D2: recurrent DQN learning from replayed sequences that start from their stored state
after a burn-in (Kapturowski et al. 2019).

The agent contract (`jaxrl_sys.core.types.AgentDef`) and the public functions of `r2d2`:
config.py (Config), networks.py (RecurrentQNetwork and its uses), losses.py (targets and
loss), defaults.py (the shipped per-env defaults and the learning promises), agent.py (`make`
and the rest)."""

from jaxrl_sys.agents.r2d2.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    EnvState,
    State,
    act,
    collect,
    greedy_action,
    init,
    learn,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.r2d2.config import Config
from jaxrl_sys.agents.r2d2.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.r2d2.losses import (
    Batch,
    r2d2_loss,
    sequence_priorities,
    sequence_q_targets,
    taken_q,
)
from jaxrl_sys.agents.r2d2.networks import (
    RecurrentQNetwork,
    build_network,
    next_q,
    step_q,
    unroll,
)

__all__ = [
    'DEFAULT_ENV',
    'Config',
    'default_config',
    'TUNED',
    'PROMISES',
    'RecurrentQNetwork',
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
    'update',
    'make',
    'greedy_action',
    'DEFAULT_EVAL_EPISODES',
    'MEMORY', 'PLAYS',
    'step_q',
    'next_q',
    'unroll',
    'taken_q',
    'sequence_q_targets',
    'sequence_priorities',
    'r2d2_loss',
]
