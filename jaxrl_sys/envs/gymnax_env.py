"""Adapter from a gymnax 1.x environment (plus its params) to our static `Env` protocol.

gymnax is imported lazily (only when an adapter is built) because importing it costs seconds.
"""

from __future__ import annotations

import dataclasses

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.types import Box, Discrete, EnvSpec, PyTree
from jaxrl_sys.envs import params as env_params
from jaxrl_sys.envs.errors import EnvParamError

Info = dict[str, jax.Array]


class GymnaxEnv:
    """A gymnax environment with its params baked in, as a static object of pure functions.

    Observations come back as float32 (MinAtar/bsuite give bools or ints; a `Discrete`
    observation space is one-hot encoded), reward as float32, terminated/truncated as bool, and
    `info` holds only `final_observation` so every env has the same info structure. The object
    hashes by identity, so it can be a static argument or a closure value under `jit`.
    """

    def __init__(self, gymnax_env: Any, params: Any, name: str | None = None) -> None:
        self.gymnax_env = gymnax_env
        self.params = params
        self._one_hot_n: int | None = None
        self.spec = self._build_spec(name or gymnax_env.name)

    @property
    def unwrapped(self) -> "GymnaxEnv":
        """This env itself (wrappers forward `unwrapped` to their innermost env)."""
        return self

    def __repr__(self) -> str:
        return f"GymnaxEnv({self.spec.name})"

    def _build_spec(self, name: str) -> EnvSpec:
        """Translate the gymnax observation/action spaces into an `EnvSpec`."""
        obs_space = self.gymnax_env.observation_space(self.params)
        kind = type(obs_space).__name__
        if kind == "Discrete":
            self._one_hot_n = int(obs_space.n)
            obs_shape: tuple[int, ...] = (self._one_hot_n,)
        elif kind == "Box":
            obs_shape = tuple(int(d) for d in obs_space.shape)
        else:
            raise TypeError(f"{name}: unsupported gymnax observation space {obs_space!r}")
        return EnvSpec(
            name=name,
            obs_shape=obs_shape,
            obs_dtype="float32",
            action_space=_action_space(self.gymnax_env.action_space(self.params), name),
            # 0: no bound (a user's EnvParams without gymnax's max_steps_in_episode)
            max_episode_steps=int(getattr(self.params, "max_steps_in_episode", 0)),
        )

    def _obs(self, obs: jax.Array) -> jax.Array:
        """Cast a raw gymnax observation to our float32 layout."""
        if self._one_hot_n is not None:
            return jax.nn.one_hot(obs, self._one_hot_n, dtype=jnp.float32)
        return jnp.asarray(obs, dtype=jnp.float32)

    def reset(self, key: jax.Array) -> tuple[jax.Array, PyTree]:
        """Start an episode: returns the float32 observation and the gymnax state."""
        obs, state = self.gymnax_env.reset(key, self.params)
        return self._obs(obs), state

    def step(
        self, key: jax.Array, state: PyTree, action: jax.Array
    ) -> tuple[jax.Array, PyTree, jax.Array, jax.Array, jax.Array, Info]:
        """One transition with gymnax auto-reset; continuous actions are passed through as given."""
        obs, state, reward, terminated, truncated, info = self.gymnax_env.step(
            key, state, action, self.params
        )
        return (
            self._obs(obs),
            state,
            jnp.asarray(reward, dtype=jnp.float32),
            jnp.asarray(terminated, dtype=jnp.bool_),
            jnp.asarray(truncated, dtype=jnp.bool_),
            {"final_observation": self._obs(info["final_observation"])},
        )


def build(name: str, env_class: type | None, make_env: Callable[..., Any],
          params: dict[str, Any]) -> GymnaxEnv:
    """A `GymnaxEnv` of `make_env(**constructor args)` with the other `params` replacing fields
    of its `default_params`; constructor arguments are those of `env_class`'s `__init__` (none
    for None: an env already made). Names and values are checked first (one-line
    `EnvParamError`s)."""
    constructor = env_params.signature_params(env_class)[0] if env_class is not None else {}
    kwargs = env_params.check_values(
        name, {k: v for k, v in params.items() if k in constructor}, constructor)
    env_params.check_required(name, kwargs, constructor)
    try:
        gym_env = make_env(**kwargs)
    except (TypeError, ValueError, KeyError) as error:
        raise EnvParamError(f"env {name!r} refused its constructor argument(s) "
                            f"{', '.join(kwargs) or '(none)'}: {' '.join(str(error).split())}"
                            ) from None
    defaults = gym_env.default_params
    fields = env_params.field_params(defaults) if dataclasses.is_dataclass(defaults) else {}
    env_params.check_names(name, params, {**constructor, **fields})
    replaced = env_params.check_values(
        name, {k: v for k, v in params.items() if k not in constructor}, fields)
    return GymnaxEnv(gym_env, defaults.replace(**replaced) if replaced else defaults, name=name)


def _action_space(space: Any, name: str) -> Discrete | Box:
    """Translate a gymnax action space into ours (Box bounds broadcast to per-element floats)."""
    kind = type(space).__name__
    if kind == "Discrete":
        return Discrete(n=int(space.n))
    if kind == "Box":
        shape = tuple(int(d) for d in space.shape)
        return Box(shape=shape, low=_bounds(space.low, shape), high=_bounds(space.high, shape))
    raise TypeError(f"{name}: unsupported gymnax action space {space!r}")


def _bounds(value: Any, shape: tuple[int, ...]) -> tuple[float, ...]:
    """Broadcast a bound to `shape` and flatten it to Python floats (float32 values kept short)."""
    arr = np.broadcast_to(np.asarray(value), shape).reshape(-1)
    if arr.dtype == np.float32:  # 0.1f -> 0.1 rather than 0.10000000149011612
        return tuple(float(str(x)) for x in arr)
    return tuple(float(x) for x in arr)
