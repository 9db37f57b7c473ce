"""A user's own JAX envs, trained by name: `--env custom_env_example:Corridor` (docs/custom-env.md).

`Corridor` is the gymnax-style example of the docs; `corridor_of_eight` a gymnax env already
made, `make_endless` a factory returning one of our envs (spec, reset, step), and `NOT_AN_ENV`
something that is none of these.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_sys.core.types import Discrete, EnvSpec


@struct.dataclass
class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = 20
    step_cost: float = 0.01


@struct.dataclass
class EnvState(environment.EnvState):
    pos: jax.Array


class Corridor(environment.Environment):
    """Walk right along `length` cells to the exit: +1 there, -step_cost for every other step."""

    def __init__(self, length: int = 5):
        super().__init__()
        self.length = length

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def reset_env(self, key, params):
        state = EnvState(time=0, pos=jnp.int32(0))
        return jax.nn.one_hot(state.pos, self.length), state

    def step_env(self, key, state, action, params):
        pos = jnp.clip(state.pos + 2 * action - 1, 0, self.length - 1)
        state = EnvState(time=state.time + 1, pos=pos)
        done = pos == self.length - 1
        reward = jnp.where(done, 1.0, -params.step_cost)
        return jax.nn.one_hot(pos, self.length), state, reward, done, {}

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (self.length,))

    def action_space(self, params):
        return spaces.Discrete(2)


corridor_of_eight = Corridor(length=8)


class Endless:
    """One of our envs (spec, reset, step): reward 1 every step, never terminated; the episode
    bound `max_steps` truncates it."""

    def __init__(self, max_steps: int) -> None:
        self.spec = EnvSpec("Endless", (1,), "float32", Discrete(2), max_steps)

    def reset(self, key):
        return jnp.zeros((1,), jnp.float32), jnp.zeros((), jnp.int32)

    def step(self, key, state, action):
        t = state + 1
        truncated = t >= self.spec.max_episode_steps
        obs = jnp.where(truncated, 0, t).astype(jnp.float32)[None]
        info = {"final_observation": t.astype(jnp.float32)[None]}
        return obs, jnp.where(truncated, 0, t), jnp.float32(1.0), jnp.bool_(False), truncated, info


def make_endless(max_steps: int = 400) -> Endless:
    """A factory: the env params are its arguments (`--set env.max_steps=...`)."""
    return Endless(max_steps)


NOT_AN_ENV = 42
