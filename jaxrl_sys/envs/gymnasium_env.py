"""`gymnasium:<id>` envs for the host loop: a spec read from one env, worker processes on demand.

A `GymnasiumEnv` is not a JAX env: it has the `spec` agents build themselves from, plus what the
host loop needs to run the env in worker processes (`make_vector`) and to translate between
Gymnasium's numpy values and the agents' arrays (`encode_obs`, `decode_actions`).

Ids may name a module to import first, as Gymnasium allows: `gymnasium:my_pkg.envs:MyEnv-v0`
imports `my_pkg.envs` (in this process and in every worker) before making `MyEnv-v0`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from jaxrl_sys.envs.child_processes import ended_on_failure, sigint_kept_from_children
from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError, UnsupportedEnvError
from jaxrl_sys.envs import gymnasium_worker
from jaxrl_sys.core.types import Box, Discrete, EnvSpec

START_METHODS = ("spawn", "forkserver")


def finite_threshold(spec: Any) -> float | None:
    """The return `spec.reward_threshold` names when it is a finite number, else None: some
    envs register an infinite threshold to say they have none."""
    threshold = getattr(spec, "reward_threshold", None)
    return float(threshold) if threshold is not None and math.isfinite(threshold) else None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text or type(error).__name__


class GymnasiumEnv:
    """A Gymnasium env, described for agents (`spec`) and runnable by the host loop."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], observation_space, action_space,
                 max_episode_steps: int, reward_threshold: float | None) -> None:
        self.env_id = env_id
        self.kwargs = dict(kwargs)
        self.name = f"gymnasium:{env_id}"
        self.reward_threshold = reward_threshold
        self._obs_space = observation_space
        self._action_space = action_space
        self.spec = EnvSpec(
            name=self.name,
            obs_shape=_obs_shape(self.name, observation_space),
            obs_dtype="float32",
            action_space=_action_space(self.name, action_space),
            max_episode_steps=max_episode_steps,
        )

    def env_fn(self):
        """A picklable no-argument factory of one env, for worker processes. It refers to
        Gymnasium only, so a worker imports neither this package nor JAX (seconds each)."""
        import gymnasium

        return functools.partial(gymnasium.make, self.env_id, **self.kwargs)

    def make_vector(self, num_envs: int, start_method: str = "spawn"):
        """`num_envs` envs in worker processes (Gymnasium's AsyncVectorEnv, shared memory).

        Autoreset is SAME_STEP: a step that ends an episode returns the next episode's first
        observation and the last one in `info["final_obs"]`, the on-device envs' semantics.
        `fork` is not offered: JAX is multithreaded and not fork-safe.
        """
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode

        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {START_METHODS}, got {start_method!r}")
        # Ctrl-C while the workers start must not leave any behind, nor reach one importing
        with ended_on_failure(), sigint_kept_from_children():
            return AsyncVectorEnv(
                [self.env_fn() for _ in range(num_envs)],
                shared_memory=True,
                context=start_method,
                daemon=True,
                worker=gymnasium_worker.worker,
                autoreset_mode=AutoresetMode.SAME_STEP,
            )

    def make_one(self, render_mode: str | None = None):
        """One env in this process (for drawing an episode)."""
        import gymnasium

        return gymnasium.make(self.env_id, render_mode=render_mode, **self.kwargs)

    def learning_signals(self, reward: np.ndarray, terminated: np.ndarray,
                         info: dict) -> tuple[np.ndarray, np.ndarray]:
        """The rewards and terminations the learner sees for one vector step; the logged
        returns always use the env's own rewards. Unchanged here (see `jaxrl_sys.envs.atari`)."""
        del info
        return reward, terminated

    def encode_obs(self, obs: np.ndarray) -> np.ndarray:
        """A batch of Gymnasium observations as the agents' float32 arrays (one-hot if Discrete)."""
        from gymnasium import spaces

        if isinstance(self._obs_space, spaces.Discrete):
            index = np.asarray(obs, np.int64) - int(self._obs_space.start)
            return np.eye(int(self._obs_space.n), dtype=np.float32)[index]
        return np.asarray(obs, np.float32)

    def decode_actions(self, actions: np.ndarray) -> np.ndarray:
        """A batch of agent actions [N, ...] as Gymnasium actions: Discrete offset by `start`,
        Box clipped to its bounds (the agent keeps its unclipped sample for the log-prob)."""
        from gymnasium import spaces

        space = self._action_space
        if isinstance(space, spaces.Discrete):
            return np.asarray(actions, np.int64) + int(space.start)
        return clip_to_bounds(actions, space.low, space.high).astype(space.dtype)


def clip_to_bounds(actions: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """`actions` [N, *shape] clipped elementwise to the Box bounds `low`/`high` [*shape]: a
    Gaussian policy's samples fall outside them, which an env may not accept."""
    actions = np.asarray(actions)
    return np.clip(actions, np.asarray(low), np.asarray(high)).astype(actions.dtype, copy=False)


def _obs_shape(name: str, space) -> tuple[int, ...]:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.number):
        return tuple(int(d) for d in space.shape)
    raise UnsupportedEnvError(
        f"{name}: observation space {space} is not supported (Box or Discrete only)"
    )


def _action_space(name: str, space) -> Discrete | Box:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return Box(
            shape=tuple(int(d) for d in space.shape),
            low=tuple(float(x) for x in space.low),
            high=tuple(float(x) for x in space.high),
        )
    raise UnsupportedEnvError(
        f"{name}: action space {space} is not supported (Discrete or 1-D Box only)"
    )


def make(env_id: str, **kwargs: Any) -> GymnasiumEnv:
    """Resolve Gymnasium id `env_id` with `kwargs`, reading its spaces from one env made here.

    Raises `UnknownEnvError` for an id Gymnasium does not know, `EnvParamError` for kwargs the
    env rejects and `UnsupportedEnvError` for spaces the agents cannot use; all one line.
    """
    import gymnasium
    from gymnasium import error as gym_error

    name = f"gymnasium:{env_id}"
    try:
        env = gymnasium.make(env_id, **kwargs)
    except (gym_error.Error, ModuleNotFoundError) as error:
        raise UnknownEnvError(f"unknown env {name!r}: {_one_line(error)}") from None
    except (TypeError, ValueError) as error:
        raise EnvParamError(f"bad param(s) for env {name!r}: {_one_line(error)}") from None
    try:
        spec = env.spec
        max_steps = spec.max_episode_steps if spec and spec.max_episode_steps else 0
        return GymnasiumEnv(env_id, kwargs, env.observation_space, env.action_space,
                            int(max_steps), finite_threshold(spec))
    finally:
        env.close()
