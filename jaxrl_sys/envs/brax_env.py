"""Brax physics envs (`brax:<name>`, e.g. `brax:hopper`) on device, as our `Env`.

Brax's own `State` carries the physics, observation, reward and a `done` flag (a fall ends
hopper, walker2d, ant and humanoid episodes); this adapter adds what our interface promises:
the episode bound (`episode_length`, 1000 by default as in Brax's trainers) as truncation,
gymnax-style auto-reset with a fresh initial state drawn from the step's key, and
`final_observation`. The backend is a parameter: `--set env.backend=positional`.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError
from jaxrl_sys.core.types import Box, EnvSpec

PREFIX = "brax:"
# brax.envs' registered locomotion and manipulation tasks ("fast" is its test env)
NAMES = ("ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup", "inverted_pendulum",
         "inverted_double_pendulum", "pusher", "reacher", "swimmer", "walker2d")
BACKENDS = ("generalized", "positional", "spring", "mjx")


@struct.dataclass
class BraxEnvState:
    """Brax's state of one env plus the steps taken in its episode."""

    physics: Any  # brax.envs.State
    steps: jax.Array  # int32


def import_brax_envs() -> Any:
    """`brax.envs`, imported without the noise its dependencies print (mujoco's optional
    warp backend on stdout, a maintenance notice as a warning)."""
    # MuJoCo picks its OpenGL platform when imported (evaluate.py --render draws Brax tasks
    # with MuJoCo's renderer): on Linux without a display, off-screen EGL unless the user chose
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from brax import envs as brax_envs
    return brax_envs


class BraxEnv:
    """A Brax env with auto-reset and an episode bound; a static object of pure functions."""

    def __init__(self, name: str, backend: str = "generalized", episode_length: int = 1000) -> None:
        if name not in NAMES:
            raise UnknownEnvError(f"unknown brax env {name!r}; brax has: {', '.join(NAMES)}")
        if backend not in BACKENDS:
            raise EnvParamError(f"backend={backend!r} for {PREFIX}{name}; one of: "
                                f"{', '.join(BACKENDS)}")
        if not (isinstance(episode_length, int) and episode_length >= 1):
            raise EnvParamError(f"episode_length must be an int >= 1, got {episode_length!r}")
        brax_envs = import_brax_envs()
        with warnings.catch_warnings():  # the same notice, on building a system from MJCF
            warnings.simplefilter("ignore")
            self.brax_env = brax_envs.get_environment(name, backend=backend)
        self.name, self.backend = name, backend
        actions = int(self.brax_env.action_size)
        self.spec = EnvSpec(
            name=f"{PREFIX}{name}",
            obs_shape=_observation_shape(self.brax_env, name, backend),
            obs_dtype="float32",
            action_space=Box((actions,), (-1.0,) * actions, (1.0,) * actions),
            max_episode_steps=episode_length,
        )

    @property
    def unwrapped(self) -> "BraxEnv":
        return self

    def __repr__(self) -> str:
        return f"BraxEnv({self.name!r}, backend={self.backend!r})"

    def reset(self, key: jax.Array) -> tuple[jax.Array, BraxEnvState]:
        """A fresh episode (Brax draws the initial pose from `key`)."""
        physics = _float32_reward_and_done(self.brax_env.reset(key))
        return physics.obs, BraxEnvState(physics, jnp.zeros((), jnp.int32))

    def step(self, key: jax.Array, state: BraxEnvState, action: jax.Array):
        """One control step; an episode ends when Brax says so (terminated) or at
        `episode_length` steps (truncated), and the env starts a new one from `key`."""
        physics = _float32_reward_and_done(
            self.brax_env.step(state.physics, jnp.asarray(action, jnp.float32)))
        steps = state.steps + 1
        terminated = physics.done > 0.5
        truncated = (steps >= self.spec.max_episode_steps) & ~terminated
        done = terminated | truncated
        fresh_obs, fresh = self.reset(key)
        after = BraxEnvState(physics, steps)
        next_state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, after)
        return (
            jnp.where(done, fresh_obs, physics.obs),
            next_state,
            physics.reward,
            terminated,
            truncated,
            {"final_observation": physics.obs},
        )


# the observation shape of each (task, backend): tracing a reset costs about a second per env
# built, and a table of every agent's defaults or a sweep builds the same env many times
_OBS_SHAPES: dict[tuple[str, str], tuple[int, ...]] = {}


def _observation_shape(brax_env: Any, name: str, backend: str) -> tuple[int, ...]:
    """The observation's shape from a traced reset (once per task and backend): Brax's
    `observation_size` runs a reset op by op, several seconds per env on a CPU."""
    if (name, backend) not in _OBS_SHAPES:
        key = jax.ShapeDtypeStruct((2,), jnp.uint32)
        _OBS_SHAPES[name, backend] = tuple(
            int(n) for n in jax.eval_shape(brax_env.reset, key).obs.shape)
    return _OBS_SHAPES[name, backend]


def _float32_reward_and_done(physics: Any) -> Any:
    """Brax's state with `reward` and `done` as float32 arrays: some tasks give a Python
    float reward (inverted_pendulum: 1 per step), which a scan carry cannot hold."""
    return physics.replace(reward=jnp.asarray(physics.reward, jnp.float32),
                           done=jnp.asarray(physics.done, jnp.float32))


def make(name: str, **params: Any) -> BraxEnv:
    """`brax:<name>` -> BraxEnv, with `backend` and `episode_length` as env params."""
    task = name[len(PREFIX):]
    if not task:
        raise UnknownEnvError(f"{name!r} names no brax env")
    unknown = sorted(set(params) - {"backend", "episode_length"})
    if unknown:
        raise EnvParamError(f"unknown param(s) {', '.join(unknown)} for env {name!r}; valid: "
                            "backend, episode_length")
    return BraxEnv(task, **params)
