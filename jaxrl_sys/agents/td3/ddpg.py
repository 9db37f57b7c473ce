"""DDPG (Lillicrap et al. 2016), the `ddpg` agent: TD3's contract (this package), promises
included, with one critic, the actor and targets updated every step and no target policy
smoothing (`defaults.DDPG`); with `--set exploration=apex` it is Ape-X DDPG (each env its own
noise scale by global env id, on device and in the host loop)."""

from jaxrl_sys.agents.td3 import *  # noqa: F403 (TD3's agent contract, all of it)
from jaxrl_sys.agents.td3 import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.td3.defaults import ddpg_config as default_config  # noqa: F401
from jaxrl_sys.agents.td3.defaults import DDPG_PROMISES as PROMISES  # noqa: F401
