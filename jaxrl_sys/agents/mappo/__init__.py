"""MAPPO: multi-agent PPO with parameter sharing and a centralised critic on the env's world
state (Yu et al. 2022), on JaxMARL's envs (discrete or continuous actions, one team or teams
that compete); IPPO is the same agent with
`critic="local"` (the `ippo` agent, `jaxrl_sys.agents.mappo.ippo`).

The agent contract (`jaxrl_sys.core.types.AgentDef`): agent.py (Config, `make` and the rest),
networks.py (the shared actor and critic, masking, agent ids), losses.py (team advantages,
the masked clipped loss), defaults.py (shipped per-env defaults and the learning promises)."""

from jaxrl_sys.agents.mappo.agent import (
    DEFAULT_EVAL_EPISODES,
    MEMORY,
    PLAYS,
    Agent,
    Config,
    State,
    Trajectory,
    build_network,
    collect,
    greedy_action,
    init,
    make,
    placement_problem,
    update,
)
from jaxrl_sys.agents.mappo.config import CRITICS
from jaxrl_sys.agents.mappo.defaults import DEFAULT_ENV, PROMISES, TUNED, default_config
from jaxrl_sys.agents.mappo.losses import mappo_loss, team_advantages
from jaxrl_sys.agents.mappo.networks import (
    TeamActorCritic,
    critic_inputs,
    masked_logits,
    sample,
    scored,
    team_memory,
)
from jaxrl_sys.agents.families.teams import with_agent_ids

__all__ = [
    'CRITICS', 'DEFAULT_ENV', 'DEFAULT_EVAL_EPISODES', 'PROMISES', 'MEMORY', 'PLAYS',
    'TUNED', 'Agent', 'Config', 'State', 'TeamActorCritic', 'Trajectory', 'build_network',
    'collect', 'critic_inputs', 'default_config', 'greedy_action', 'init', 'make',
    'mappo_loss', 'masked_logits', 'placement_problem', 'sample', 'scored', 'team_advantages', 'team_memory', 'update', 'with_agent_ids',
]
