"""IPPO: independent PPO learners with shared parameters (de Witt et al. 2020), the `ippo`
agent: MAPPO's contract (this package), with each agent's critic on its own observation and
id (`critic="local"`), so nothing centralised is learned. Its shipped defaults are MAPPO's
with that one field changed (`defaults.ippo_config`); its promises are MAPPO's but
predator-prey, whose policies by team MAPPO's own promise trains."""

from jaxrl_sys.agents.mappo import *  # noqa: F403 (MAPPO's agent contract, all of it)
from jaxrl_sys.agents.mappo import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.mappo.defaults import IPPO_PROMISES as PROMISES  # noqa: F401
from jaxrl_sys.agents.mappo.defaults import ippo_config as default_config
