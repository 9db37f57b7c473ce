"""REINFORCE with a learned baseline (Williams 1992), the `pg` agent: PPO's contract (this
package) with the unclipped policy-gradient objective on whole-episode returns, one gradient
step per rollout; steps whose episode runs past the rollout's end are left out of the loss
(`defaults.PG`, `agent.whole_episode_targets`)."""

from jaxrl_sys.agents.ppo import *  # noqa: F403 (PPO's agent contract, all of it)
from jaxrl_sys.agents.ppo import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.ppo.defaults import pg_config as default_config
from jaxrl_sys.agents.ppo.defaults import PG_TUNED as TUNED  # noqa: F401
from jaxrl_sys.agents.ppo.defaults import PG_PROMISES as PROMISES  # noqa: F401
