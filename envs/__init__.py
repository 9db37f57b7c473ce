"""Environments: the registry (`make`, `names`, `register`), the gymnax adapter and wrappers.

Importing this package does not import gymnax; that happens on the first `make` of a gymnax id.
"""

from envs.gymnax_env import GymnaxEnv
from envs.registry import UnknownEnvError, make, names, register, reward_threshold
from envs.wrappers import (
    EpisodeStatistics,
    EpisodeStatsState,
    NormalizeObservation,
    NormalizeObsState,
    RunningStats,
)

__all__ = [
    "EpisodeStatistics",
    "EpisodeStatsState",
    "GymnaxEnv",
    "NormalizeObsState",
    "NormalizeObservation",
    "RunningStats",
    "UnknownEnvError",
    "make",
    "names",
    "register",
    "reward_threshold",
]
