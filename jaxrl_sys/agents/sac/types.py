"""SAC's types: what `make` fixes once (`Setup`), the parameters, the learner state and the
per-env state."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import optax
from flax import struct

from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.agents.families.continuous_control import Critic
from jaxrl_sys.agents.sac.networks import Actor
from jaxrl_sys.core import obs_norm, replay
from jaxrl_sys.core.rollout import VecEnvState
from jaxrl_sys.core.types import Env


@dataclasses.dataclass(frozen=True, eq=False)
class Setup:
    """The static parts `make` binds to SAC's functions: config, env, networks, optimiser,
    the loss with its hyper-parameters, and the action box."""

    config: Config
    env: Env
    actor: Actor
    critic: Critic
    optimizer: optax.GradientTransformation  # Adam's scaling; each part its own learning rate
    loss: Callable[..., tuple[jax.Array, dict]]  # `losses.sac_loss` with networks bound
    low: jax.Array  # [A] the env's action bounds
    high: jax.Array  # [A]
    action_dim: int
    axis_name: Optional[str]  # the device axis gradients average over


@struct.dataclass
class Params:
    """Everything the policy and the learner read: actor, twin critics, targets, log alpha."""

    actor: Any
    critic: Any  # twin critics, every leaf with a leading axis of 2
    target_critic: Any
    log_alpha: jax.Array


class Trainable(NamedTuple):
    """The parameters gradient descent moves, each with its own learning rate."""

    actor: Any
    critic: Any
    log_alpha: jax.Array


@struct.dataclass
class State:
    """Learner state: parameters, optimiser states, counters (per seed, replicated), and the
    observation statistics when `normalize_obs` (None otherwise)."""

    params: Params
    opt_state: Any  # Adam moments, shaped like the Trainable
    env_steps: jax.Array  # env steps taken so far, over all envs of the seed
    updates: jax.Array  # gradient updates applied so far
    obs_stats: Optional[obs_norm.RunningStats] = None


@struct.dataclass
class EnvState:
    """The per-env part of a run; every leaf has a leading env axis."""

    envs: VecEnvState
    replay: replay.ReplayState
    noise: jax.Array  # [envs, action_dim]: the policy's last exploration noise, from 0 (Config)
