"""Environments: the registry (`make`, `make_eval`, `names`, `register`), adapters and wrappers.

Importing this package does not import gymnax; that happens on the first `make` of a gymnax id.
Our own pure-JAX envs (e.g. tic-tac-toe in `envs.tictactoe`) are imported on their first `make`.
"""

from envs.errors import EnvParamError, UnknownEnvError, UnsupportedEnvError
from envs.gymnax_env import GymnaxEnv
from envs.registry import (
    is_host_env,
    make,
    make_eval,
    make_host,
    names,
    register,
    reward_threshold,
)
from envs.wrappers import (
    EpisodeStatistics,
    EpisodeStatsState,
)

# errors that mean bad input (a name, a parameter): one line and exit code 2 in the scripts
USER_ERRORS = (UnknownEnvError, EnvParamError, UnsupportedEnvError)

__all__ = [
    "EnvParamError",
    "EpisodeStatistics",
    "EpisodeStatsState",
    "GymnaxEnv",
    "UnknownEnvError",
    "USER_ERRORS",
    "UnsupportedEnvError",
    "is_host_env",
    "make",
    "make_eval",
    "make_host",
    "names",
    "register",
    "reward_threshold",
]
