"""VDN (Sunehag et al. 2018), the `vdn` agent: QMIX's (this package) with the team's Q-value
the sum of the agents' chosen Q-values (`mixer="vdn"`), so no mixer and no world state are
learned or stored. Its shipped defaults are QMIX's with that one field changed
(`defaults.vdn_config`)."""

from jaxrl_sys.agents.qmix import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MULTI_AGENT,
    SELF_PLAY,
    TUNED,
    Agent,
    Config,
    State,
    greedy_action,
    init,
    make,
    placement_problem,
)
from jaxrl_sys.agents.qmix.defaults import vdn_config as default_config
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
