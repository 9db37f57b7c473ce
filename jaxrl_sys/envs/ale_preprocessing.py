"""The standard Atari preprocessing, built inside each Gymnasium worker process.

Machado et al. / Nature-DQN conventions: the ALE env with frame skip 1 underneath, then
Gymnasium's `AtariPreprocessing` (up to 30 no-op starts, frame skip 4 with a max over the last
two frames, 84x84 grey) and a stack of the last 4 frames, observations uint8 [4, 84, 84].

Episodes are whole games here: losing a life and clipping rewards are training signals only
(`jaxrl_sys.envs.atari`), so that logged returns are the game's raw scores. `LifeLossInfo` reports a
lost life in `info["life_lost"]` for that. This module imports Gymnasium and ale-py only (no
JAX), so a spawned worker starts in the time those take to import.
"""

from __future__ import annotations

from typing import Any

import gymnasium

FRAME_SKIP = 4
FRAME_STACK = 4
SCREEN_SIZE = 84
NOOP_MAX = 30


def make_atari(env_id: str, render_mode: str | None = None, **kwargs: Any):
    """One preprocessed ALE env `env_id` (e.g. "ALE/Breakout-v5"); `kwargs` go to the ALE env
    (e.g. repeat_action_probability), except frameskip, which the preprocessing owns."""
    import ale_py
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gymnasium.register_envs(ale_py)
    env = gymnasium.make(env_id, frameskip=1, render_mode=render_mode, **kwargs)
    env = AtariPreprocessing(env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP,
                             screen_size=SCREEN_SIZE, grayscale_obs=True)
    env = FrameStackObservation(env, FRAME_STACK)
    return LifeLossInfo(env)


class LifeLossInfo(gymnasium.Wrapper):
    """Adds `info["life_lost"]`: the step lost a life without ending the game."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._lives = self._current_lives()
        return obs, {**info, "life_lost": False}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self._current_lives()
        lost = lives < self._lives and not (terminated or truncated)
        self._lives = lives
        return obs, reward, terminated, truncated, {**info, "life_lost": lost}

    def _current_lives(self) -> int:
        return int(self.env.unwrapped.ale.lives())
