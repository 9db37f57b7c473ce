"""Environments: the registry (`make`, `make_eval`, `names`, `register`), adapters and wrappers.

Names are imported on first use (as `jaxrl_sys`'s own are), so that importing a submodule such
as `jaxrl_sys.envs.gymnasium_worker` in a Gymnasium worker process imports no JAX. gymnax is
imported on the first `make` of a gymnax id, our own pure-JAX envs (e.g. tic-tac-toe in
`jaxrl_sys.envs.tictactoe`) on their first `make`, and a user's own env named `module:attr`
(`jaxrl_sys.envs.custom`, docs/custom-env.md) on its first `make`.
"""

from __future__ import annotations

from jaxrl_sys.core.lazy import lazy_exports

_NAMES = {
    "EnvParamError": "jaxrl_sys.envs.errors",
    "UnknownEnvError": "jaxrl_sys.envs.errors",
    "UnsupportedEnvError": "jaxrl_sys.envs.errors",
    "USER_ERRORS": "jaxrl_sys.envs.errors",
    "GymnaxEnv": "jaxrl_sys.envs.gymnax_env",
    "EnvFamily": "jaxrl_sys.envs.registry",
    "FAMILIES": "jaxrl_sys.envs.registry",
    "is_host_env": "jaxrl_sys.envs.registry",
    "is_multi_agent": "jaxrl_sys.envs.registry",
    "make": "jaxrl_sys.envs.registry",
    "make_eval": "jaxrl_sys.envs.registry",
    "make_host": "jaxrl_sys.envs.registry",
    "names": "jaxrl_sys.envs.registry",
    "check_opponent": "jaxrl_sys.envs.registry",
    "num_players": "jaxrl_sys.envs.registry",
    "register": "jaxrl_sys.envs.registry",
    "reward_threshold": "jaxrl_sys.envs.registry",
    "EpisodeStatistics": "jaxrl_sys.envs.wrappers",
    "EpisodeStatsState": "jaxrl_sys.envs.wrappers",
}

__all__ = sorted(_NAMES)


__getattr__, __dir__ = lazy_exports(__name__, _NAMES)
