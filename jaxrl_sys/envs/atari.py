"""Atari games for the host loop: `gymnasium:ALE/<Game>-v5`, preprocessed in the workers.

Observations are the standard uint8 [4, 84, 84] frame stacks (`jaxrl_sys.envs.ale_preprocessing`);
the agents' conv torso scales them on device. An episode is a whole game, so logged returns are
raw game scores; what the learner sees is shaped per vector step by `learning_signals`:
rewards clipped to their sign and a lost life treated as a terminal state (both on by
default, `--set env.clip_rewards=false` / `env.episodic_life=false` turn them off).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError, UnsupportedEnvError
from jaxrl_sys.envs.gymnasium_env import GymnasiumEnv, _one_line, finite_threshold

INSTALL_HINT = 'pip install -e ".[atari]"'
MAX_GAME_FRAMES = 108_000  # ALE v5's max_num_frames_per_episode


class AtariSignals:
    """The training signals of an Atari env: clipped rewards, a lost life as a terminal."""

    clip_rewards: bool
    episodic_life: bool

    def learning_signals(self, reward: np.ndarray, terminated: np.ndarray,
                         info: dict) -> tuple[np.ndarray, np.ndarray]:
        """Rewards and terminations for the learner (logged returns stay raw)."""
        if self.clip_rewards:
            reward = np.sign(reward)
        if self.episodic_life and "life_lost" in info:
            terminated = terminated | np.asarray(info["life_lost"], bool)
        return reward, terminated

    def encode_obs(self, obs: np.ndarray) -> np.ndarray:
        """Frame stacks stay uint8 (a quarter of float32's bytes per host-to-device copy)."""
        return np.asarray(obs, np.uint8)


class GymnasiumAtariEnv(AtariSignals, GymnasiumEnv):
    """An ALE game in Gymnasium worker processes with the standard preprocessing."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], observation_space, action_space,
                 max_episode_steps: int, reward_threshold: float | None, *,
                 clip_rewards: bool, episodic_life: bool) -> None:
        super().__init__(env_id, kwargs, observation_space, action_space, max_episode_steps,
                         reward_threshold)
        self.spec = dataclasses.replace(self.spec, obs_dtype="uint8")
        self.clip_rewards, self.episodic_life = clip_rewards, episodic_life

    def env_fn(self):
        """A picklable factory of one preprocessed game (imports no JAX in the worker)."""
        from jaxrl_sys.envs import ale_preprocessing

        return functools.partial(ale_preprocessing.make_atari, self.env_id, **self.kwargs)

    def make_one(self, render_mode: str | None = None):
        from jaxrl_sys.envs import ale_preprocessing

        return ale_preprocessing.make_atari(self.env_id, render_mode=render_mode, **self.kwargs)


def require_ale(name: str) -> None:
    """One line (UnsupportedEnvError) when ale-py is not installed."""
    try:
        import ale_py  # noqa: F401
    except ModuleNotFoundError:
        raise UnsupportedEnvError(f"{name} needs ale-py: {INSTALL_HINT}") from None


def make_gymnasium(env_id: str, clip_rewards: bool = True, episodic_life: bool = True,
                   **kwargs: Any) -> GymnasiumAtariEnv:
    """`gymnasium:<env_id>` for an ALE id, its spec read from one preprocessed env."""
    from jaxrl_sys.envs import ale_preprocessing

    name = f"gymnasium:{env_id}"
    require_ale(name)
    import gymnasium

    if "frameskip" in kwargs:
        raise EnvParamError(f"bad param for env {name!r}: frameskip is the preprocessing's "
                            f"({ale_preprocessing.FRAME_SKIP})")
    try:
        env = ale_preprocessing.make_atari(env_id, **kwargs)
    except (gymnasium.error.Error, ModuleNotFoundError) as error:
        raise UnknownEnvError(f"unknown env {name!r}: {_one_line(error)}") from None
    except (TypeError, ValueError) as error:
        raise EnvParamError(f"bad param(s) for env {name!r}: {_one_line(error)}") from None
    try:
        spec = env.spec
        # ALE truncates a game at 108,000 frames itself (27,000 agent steps at frame skip 4)
        max_steps = spec.max_episode_steps if spec and spec.max_episode_steps else \
            MAX_GAME_FRAMES // ale_preprocessing.FRAME_SKIP
        return GymnasiumAtariEnv(env_id, kwargs, env.observation_space, env.action_space,
                                 int(max_steps), finite_threshold(spec),
                                 clip_rewards=bool(clip_rewards),
                                 episodic_life=bool(episodic_life))
    finally:
        env.close()
