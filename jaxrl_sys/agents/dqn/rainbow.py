"""Rainbow (Hessel et al. 2018), the `rainbow` agent: DQN's contract (this package) with its
options all on (`defaults.RAINBOW`): a C51 distributional head, noisy dueling heads that explore
in place of epsilon, double Q-learning, 3-step returns and prioritised replay. Its shipped
defaults are DQN's per-env entries with those fields set (`defaults.rainbow_config`)."""

from jaxrl_sys.agents.dqn import *  # noqa: F403 (DQN's agent contract, all of it)
from jaxrl_sys.agents.dqn import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.dqn.defaults import rainbow_config as default_config
from jaxrl_sys.agents.dqn.defaults import RAINBOW_TUNED as TUNED  # noqa: F401
from jaxrl_sys.agents.dqn.defaults import RAINBOW_PROMISES as PROMISES  # noqa: F401
