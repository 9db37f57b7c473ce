"""Types shared by environments, agents and the execution layer.

An environment is a static object of pure functions (`reset`, `step`) plus an `EnvSpec`;
agents build their networks from the spec alone, so they never import a particular env.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Union

import jax

PyTree = Any
Metrics = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Discrete:
    """A discrete action space with actions 0..n-1."""

    n: int


@dataclasses.dataclass(frozen=True)
class Box:
    """A continuous action space: a float vector bounded element-wise by `low` and `high`."""

    shape: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


ActionSpace = Union[Discrete, Box]


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What an agent needs to know about an environment to build itself.

    `num_players` 2 means alternating two-player zero-sum self-play: observation and reward are
    from the view of the player who moves, and the agent picks the moves of both sides.
    """

    name: str
    obs_shape: tuple[int, ...]
    obs_dtype: str
    action_space: ActionSpace
    max_episode_steps: int
    num_players: int = 1

    @property
    def discrete(self) -> bool:
        return isinstance(self.action_space, Discrete)


class Env(Protocol):
    """A pure-JAX environment with gymnax 1.x semantics and auto-reset.

    `step` returns `obs, state, reward, terminated, truncated, info`; when an episode ends the
    returned `obs`/`state` already belong to the next episode and `info["final_observation"]`
    holds the last observation of the finished one (needed to bootstrap through truncation).

    An env with a discrete action space MAY also define `legal_actions(state) -> bool[n]`, the
    legal-action mask of the state's player to move (board games); without it every action is
    legal (see `jaxrl_sys.rollout.legal_actions`).
    """

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[jax.Array, PyTree]: ...

    def step(
        self, key: jax.Array, state: PyTree, action: jax.Array
    ) -> tuple[jax.Array, PyTree, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]: ...
