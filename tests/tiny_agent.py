"""A small agent written as every agent is, for tests/test_new_agent.py: the whole agent
contract (`jaxrl_sys.core.types.AgentDef`) in one module outside the package, so that a test
can register it with one line and see the CLI, the learning checks and the benchmark take it.

It acts uniformly at random and learns nothing (`update` only counts): all the plumbing needs,
and fast.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp

from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import ConfigError, RolloutBudget, check_at_least, check_budget
from jaxrl_sys.core.rollout import VecEnvState, episode_metrics, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Env, LearningPromise

DEFAULT_ENV = "CartPole-v1"
DEFAULT_EVAL_EPISODES = 0  # training returns are the random policy's
PLAYS = "single"
MEMORY = "none"
# a random policy lasts about 22 steps on CartPole: the bar it keeps
PROMISES = (LearningPromise("CartPole-v1", 15.0, eval_episodes=0, chunks=2, test_seeds=0,
                            note="the tiny test agent: a random policy's return"),)


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """The tiny agent's hyper-parameters: only the run's budget."""

    total_steps: int = 2_048
    num_envs: int = 8
    rollout_steps: int = 16

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps")
        check_budget(self)


def default_config(env_name: str) -> Config:
    """The same config for every env."""
    del env_name
    return Config()


def act(num_actions: int, params: Any, obs: jax.Array, key: jax.Array,
        greedy: bool = False) -> jax.Array:
    """Uniformly random actions [B] for observations [B, ...]."""
    del params, greedy
    return jax.random.randint(key, obs.shape[:1], 0, num_actions)


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> BoundAgent:
    """The random agent bound to a discrete-action `env` (any other: one line)."""
    config.validate()
    if not env.spec.discrete:
        raise ConfigError(f"tiny needs discrete actions; {env.spec.name} has continuous ones")
    num_actions = env.spec.action_space.n
    policy = functools.partial(act, num_actions)

    def update(state: dict, batch: Any, key: jax.Array = None) -> tuple[dict, dict]:
        """Learns nothing: counts the update."""
        del batch, key
        return {"updates": state["updates"] + 1}, {}

    def train_step(state: dict, env_state: VecEnvState, key: jax.Array):
        """`rollout_steps` random steps on every env, then `update`."""
        def one_step(vstate: VecEnvState, k: jax.Array):
            act_key, env_key = jax.random.split(k)
            vstate, result = step_envs(env, vstate, policy(None, vstate.obs, act_key), env_key)
            return vstate, episode_metrics(result.info, None)

        env_state, episodes = jax.lax.scan(one_step, env_state,
                                           jax.random.split(key, config.rollout_steps))
        episodes = jax.tree.map(jnp.sum, episodes)
        state, metrics = update(state, None)
        return state, env_state, {**metrics, **collectives.psum(episodes, axis_name)}

    return BoundAgent(config, env.spec, lambda key: {"updates": jnp.zeros((), jnp.int32)},
                      functools.partial(reset_envs, env), policy, update, train_step)


def greedy_action(agent: BoundAgent):
    """The same random policy (it has nothing greedy to offer)."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(None, obs, key)


def placement_problem(config: Config, devices: int) -> Optional[str]:
    """None: every split of the envs works."""
    del config, devices
    return None
