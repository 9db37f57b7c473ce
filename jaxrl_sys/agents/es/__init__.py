"""Evolution strategies on device with evosax (OpenAI-ES; ARS in ars.py): a population of
parameter vectors, every member's episodes in one vmapped program over devices.

The agent contract (`jaxrl_sys.core.types.AgentDef`), the fitness functions (losses.py) and
the shipped per-env configs and learning promises (defaults.py) of `es`; see agent.py."""

from jaxrl_sys.agents.es.agent import (
    DEFAULT_ENV,
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    State,
    build_strategy,
    generation,
    greedy_action,
    init,
    make,
    placement_problem,
    play_members,
    update,
)
from jaxrl_sys.agents.es.config import Config
from jaxrl_sys.agents.es.defaults import PROMISES, TUNED, default_config
from jaxrl_sys.agents.es.losses import first_episode_returns, member_fitness
from jaxrl_sys.agents.es.networks import Policy, build_network, member_actions, policy_actions

__all__ = [
    "DEFAULT_ENV", "DEFAULT_EVAL_EPISODES", "MEMORY", "PLAYS", "PROMISES", "TUNED",
    "Agent", "Config", "Policy", "State",
    "build_network", "build_strategy", "default_config", "first_episode_returns",
    "generation", "greedy_action", "init", "make", "member_actions", "member_fitness",
    "placement_problem", "play_members", "policy_actions", "update",
]
