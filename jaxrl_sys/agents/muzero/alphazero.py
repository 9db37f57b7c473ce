"""AlphaZero (Silver et al. 2018), the `alphazero` agent: MuZero's contract (this package) with
the search stepping the real pure-JAX env instead of a learned model (`model="env"`); the
network only predicts the prior and the value. Its shipped defaults are MuZero's per-env
entries without the learned model's options (`defaults.alphazero_config`)."""

from jaxrl_sys.agents.muzero import *  # noqa: F403 (MuZero's agent contract, all of it)
from jaxrl_sys.agents.muzero import __all__  # noqa: F401 (the same names)
from jaxrl_sys.agents.muzero.defaults import alphazero_config as default_config  # noqa: F401
from jaxrl_sys.agents.muzero.defaults import ALPHAZERO_TUNED as TUNED  # noqa: F401
from jaxrl_sys.agents.muzero.defaults import ALPHAZERO_PROMISES as PROMISES  # noqa: F401
