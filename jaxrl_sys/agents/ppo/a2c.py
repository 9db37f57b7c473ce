"""A2C (Mnih et al. 2016, the synchronous advantage actor-critic), the `a2c` agent: PPO's
contract (this package) with the unclipped policy-gradient objective, one gradient step per
rollout of n steps, n-step returns and RMSProp (`defaults.A2C`). A3C's asynchrony is what the
host loop gives with `--staleness` above 0 (docs/notes/a2c.md)."""

from jaxrl_sys.agents.ppo import *  # noqa: F403 (PPO's agent contract, all of it)
from jaxrl_sys.agents.ppo import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.ppo.defaults import a2c_config as default_config
from jaxrl_sys.agents.ppo.defaults import A2C_TUNED as TUNED  # noqa: F401
from jaxrl_sys.agents.ppo.defaults import A2C_PROMISES as PROMISES  # noqa: F401
