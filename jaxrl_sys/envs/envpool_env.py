"""`envpool:<task>` envs for the host loop: a whole batch stepped by envpool's C++ threads.

The same host-loop interface as Gymnasium's worker processes (`jaxrl_sys.envs.gymnasium_env`), so the
host loop and the agents do not know which backend runs: `EnvpoolVector` has the
`reset_async/reset_wait/step_async/step_wait/close` methods the host loop calls and gives the
same SAME_STEP autoreset (an ended env is reset in the step that ended it, its last
observation in `info["final_obs"]`), where envpool on its own resets on the next step.

Atari tasks (`envpool:Breakout-v5`) get the same preprocessing as `gymnasium:ALE/Breakout-v5`
(envpool's own, with the same settings: 84x84 grey, frame skip 4, 4 frames, up to 30 no-ops,
sticky actions 0.25 as ALE v5, no fire on reset) and the same training signals
(`jaxrl_sys.envs.atari.AtariSignals`): whole games are episodes, rewards are clipped and lives lost are
terminal for the learner only.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from jaxrl_sys.envs.atari import AtariSignals, INSTALL_HINT
from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError, UnsupportedEnvError
from jaxrl_sys.envs.gymnasium_env import _action_space, _obs_shape, _one_line, clip_to_bounds, \
    finite_threshold
from jaxrl_sys.core.types import Box, EnvSpec

# envpool Atari settings that make a task the game `gymnasium:ALE/<Game>-v5` plays
ATARI_SETTINGS = {"episodic_life": False, "reward_clip": False, "use_fire_reset": False,
                  "repeat_action_probability": 0.25}
# settings the adapter owns (batching and seeding)
RESERVED = ("num_envs", "batch_size", "seed", "env_type")


class EnvpoolVector:
    """A batch of envpool envs behind the host loop's vector-env interface.

    `step_wait`'s timeout is not enforced: envpool steps synchronously in its own threads.
    """

    processes: tuple = ()  # no worker processes to reap (see runtime.host.workers.shutdown)
    parent_pipes: tuple = ()

    def __init__(self, task: str, num_envs: int, settings: dict[str, Any],
                 num_threads: int = 0) -> None:
        self.task, self.num_envs, self.settings = task, num_envs, settings
        self.num_threads = num_threads
        self._pool: Any = None
        self._actions: Optional[np.ndarray] = None
        self._lives: Optional[np.ndarray] = None
        self.closed = False

    def reset_async(self, seed: Optional[int] = None) -> None:
        import envpool

        if self._pool is not None:
            self._pool.close()
        self._pool = envpool.make(self.task, env_type="gymnasium", num_envs=self.num_envs,
                                  batch_size=self.num_envs, seed=0 if seed is None else seed,
                                  num_threads=self.num_threads, **self.settings)

    def reset_wait(self, timeout: Optional[float] = None) -> tuple[np.ndarray, dict]:
        del timeout
        obs, info = self._pool.reset()
        self._lives = info.get("lives")
        return obs, {**info, "life_lost": np.zeros(self.num_envs, bool)}

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def step_wait(self, timeout: Optional[float] = None):
        del timeout
        obs, reward, terminated, truncated, info = self._pool.step(self._actions)
        done = np.asarray(terminated | truncated)
        info = dict(info)
        lives = info.get("lives")
        if lives is not None:
            info["life_lost"] = (lives < self._lives) & ~done
        if done.any():
            ended = np.flatnonzero(done)
            final_obs = np.zeros_like(obs)
            final_obs[ended] = obs[ended]
            obs = obs.copy()
            obs[ended], reset_info = self._pool.reset(ended)
            if lives is not None:
                lives = lives.copy()
                lives[ended] = reset_info["lives"]
            info["final_obs"] = final_obs
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        self.closed = True


class EnvpoolEnv(AtariSignals):
    """An envpool task, described for agents (`spec`) and runnable by the host loop."""

    def __init__(self, task: str, settings: dict[str, Any], spec: EnvSpec, atari: bool,
                 reward_threshold: float | None, clip_rewards: bool, episodic_life: bool) -> None:
        self.task, self.settings = task, dict(settings)
        self.name = f"envpool:{task}"
        self.spec, self.atari = spec, atari
        self.reward_threshold = reward_threshold
        self.clip_rewards = atari and clip_rewards
        self.episodic_life = atari and episodic_life

    def make_vector(self, num_envs: int, start_method: str = "spawn") -> EnvpoolVector:
        """`num_envs` envs stepped in envpool's threads (`start_method` is not used)."""
        del start_method
        return EnvpoolVector(self.task, num_envs, self.settings)

    def encode_obs(self, obs: np.ndarray) -> np.ndarray:
        if self.atari:
            return super().encode_obs(obs)
        return np.asarray(obs, np.float32)

    def decode_actions(self, actions: np.ndarray) -> np.ndarray:
        """A batch of agent actions [N, ...] for envpool: Box actions clipped to the bounds
        (the agent keeps its unclipped sample for the log-prob), Discrete ones as they are."""
        space = self.spec.action_space
        if isinstance(space, Box):
            return clip_to_bounds(actions, space.low, space.high)
        return np.asarray(actions)

    def make_one(self, render_mode: str | None = None):
        """The same game in this process for drawing an episode (envpool does not render):
        the Gymnasium ALE env with the same preprocessing."""
        if not self.atari:
            raise UnsupportedEnvError(f"{self.name}: only envpool's Atari games can be drawn")
        from jaxrl_sys.envs import ale_preprocessing

        return ale_preprocessing.make_atari(
            f"ALE/{self.task}", render_mode=render_mode,
            repeat_action_probability=self.settings["repeat_action_probability"])


def make(task: str, clip_rewards: bool = True, episodic_life: bool = True,
         **settings: Any) -> EnvpoolEnv:
    """Resolve envpool task `task` with `settings` (envpool's make keywords) into a host env;
    one-line errors for a missing envpool, an unknown task and bad settings."""
    name = f"envpool:{task}"
    try:
        import envpool
    except ModuleNotFoundError:
        raise UnsupportedEnvError(f"{name} needs envpool: {INSTALL_HINT}") from None
    if task not in envpool.list_all_envs():
        raise UnknownEnvError(f"unknown env {name!r}: envpool has no task {task!r}")
    reserved = sorted(set(settings) & set(RESERVED))
    if reserved:
        raise EnvParamError(f"bad param(s) for env {name!r}: {', '.join(reserved)} "
                            "are set by the run")
    try:
        fields = envpool.make_spec(task).config._fields
        atari = "noop_max" in fields
        if atari:
            settings = {**ATARI_SETTINGS, **settings}
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            raise TypeError(f"unknown setting(s) {', '.join(unknown)}")
        spec = envpool.make_spec(task, **settings)
    except (TypeError, ValueError, RuntimeError) as error:
        raise EnvParamError(f"bad param(s) for env {name!r}: {_one_line(error)}") from None
    players = int(getattr(spec.config, "max_num_players", 1))
    if players != 1:  # envpool then gives a row per player, not per env: no batch of envs
        raise UnsupportedEnvError(f"{name}: a task of {players} players per env is not "
                                  "vectorisable here (one row per env; single-agent tasks only)")
    obs_space, action_space = spec.observation_space, spec.action_space
    env_spec = EnvSpec(
        name=name,
        obs_shape=_obs_shape(name, obs_space),
        obs_dtype="uint8" if atari else "float32",
        action_space=_action_space(name, action_space),
        max_episode_steps=int(spec.config.max_episode_steps),
    )
    return EnvpoolEnv(task, settings, env_spec, atari,
                      finite_threshold(spec.config),
                      bool(clip_rewards), bool(episodic_life))
