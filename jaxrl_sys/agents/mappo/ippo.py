"""IPPO: independent PPO learners with shared parameters (de Witt et al. 2020), the `ippo`
agent: MAPPO's (this package) with each agent's critic on its own observation and id
(`critic="local"`), so nothing centralised is learned. Its shipped defaults are MAPPO's with
that one field changed (`defaults.ippo_config`)."""

from jaxrl_sys.agents.mappo import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MULTI_AGENT,
    SELF_PLAY,
    Agent,
    Config,
    State,
    TUNED,
    greedy_action,
    init,
    make,
    placement_problem,
)
from jaxrl_sys.agents.mappo.defaults import ippo_config as default_config
from jaxrl_sys.core.types import LearningPromise

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("jaxmarl:MPE_simple_spread_v3", -60.0, overrides=(("total_steps", 1_000_000),),
                    chunks=10, test_seeds=2, note="team-sum return; random play: -79"),
)

__all__ = [
    'DEFAULT_ENV', 'DEFAULT_EVAL_EPISODES', 'MULTI_AGENT', 'PROMISES', 'SELF_PLAY', 'TUNED',
    'Agent', 'Config', 'State', 'default_config', 'greedy_action', 'init', 'make',
    'placement_problem',
]
