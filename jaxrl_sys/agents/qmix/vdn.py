"""VDN (Sunehag et al. 2018), the `vdn` agent: QMIX's contract (this package), promises
included, with the team's Q-value the sum of the agents' chosen Q-values (`mixer="vdn"`), so
no mixer and no world state are learned or stored. Its shipped defaults are QMIX's with that
one field changed (`defaults.vdn_config`)."""

from jaxrl_sys.agents.qmix import *  # noqa: F403 (QMIX's agent contract, all of it)
from jaxrl_sys.agents.qmix import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.qmix.defaults import vdn_config as default_config
