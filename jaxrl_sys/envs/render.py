"""RGB frames of env states: gymnax classic control drawn by Gymnasium's own renderers, Brax
tasks by Brax's (MuJoCo's renderer), JaxMARL's MPE and SMAX as JaxMARL's visualisers draw them
(matplotlib circles: MPE's entities in their colours, SMAX's living units by team).

gymnax envs do not draw themselves; their classic-control states hold the same physical
quantities as Gymnasium's, so each state is copied into a Gymnasium env made with
`render_mode="rgb_array"` and drawn there (Gymnasium draws with pygame: `pip install -e
".[render]"`).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

# gymnax name -> (Gymnasium id, gymnax state -> Gymnasium's `state` array)
_CLASSIC: dict[str, tuple[str, Callable[[Any], np.ndarray]]] = {
    "CartPole-v1": ("CartPole-v1", lambda s: [s.x, s.x_dot, s.theta, s.theta_dot]),
    "Acrobot-v1": ("Acrobot-v1",
                   lambda s: [s.joint_angle1, s.joint_angle2, s.velocity_1, s.velocity_2]),
    "Pendulum-v1": ("Pendulum-v1", lambda s: [s.theta, s.theta_dot]),
    "MountainCar-v0": ("MountainCar-v0", lambda s: [s.position, s.velocity]),
    "MountainCarContinuous-v0": ("MountainCarContinuous-v0", lambda s: [s.position, s.velocity]),
}


class RenderError(ValueError):
    """An env that cannot be drawn, or a missing drawing library; one line."""


def can_render(name: str) -> bool:
    """Whether evaluate.py can draw env `name` (envpool: its Atari games, the -v5 tasks)."""
    return name in _CLASSIC or name.startswith(("gymnasium:", "brax:")) or _jaxmarl_drawn(name) or (
        name.startswith("envpool:") and name.endswith("-v5"))


def make_renderer(name: str, env: Any) -> "ClassicControlRenderer | BraxRenderer":
    """The renderer for on-device env `name` (built as `env`): Brax's for `brax:` tasks,
    Gymnasium's classic-control drawing for the gymnax ones it covers."""
    if name.startswith("brax:"):
        return BraxRenderer(env.unwrapped)
    if _jaxmarl_drawn(name):
        return JaxMarlRenderer(env.unwrapped)
    return ClassicControlRenderer(name)


def _jaxmarl_drawn(name: str) -> bool:
    return name.startswith(("jaxmarl:MPE_", "jaxmarl:SMAX:"))


def base_state(state: Any) -> Any:
    """The innermost env state under our wrappers' states (which keep it in `env_state`)."""
    while hasattr(state, "env_state"):
        state = state.env_state
    return state


def _headless() -> None:
    for name, value in (("SDL_VIDEODRIVER", "dummy"), ("SDL_AUDIODRIVER", "dummy"),
                        ("PYGAME_HIDE_SUPPORT_PROMPT", "1")):
        os.environ.setdefault(name, value)  # no window, no sound device


def gymnasium_episode_frames(host_env: Any, act: Callable[[np.ndarray, int], Any], seed: int,
                             max_steps: int = 5_000) -> list[np.ndarray]:
    """Frames of one episode of a host-loop env (`jaxrl_sys.envs.gymnasium_env.GymnasiumEnv` or
    `jaxrl_sys.envs.envpool_env.EnvpoolEnv`) drawn by a Gymnasium env of it in this process (an Atari
    game: the screen in colour), acting with `act(obs_batch_of_one, step) -> actions`, for at
    most `max_steps` steps (a GIF of a whole Atari game can need gigabytes)."""
    _headless()
    import gymnasium

    try:
        env = host_env.make_one(render_mode="rgb_array")
    except gymnasium.error.DependencyNotInstalled as error:
        raise RenderError(f"rendering {host_env.name} needs: "
                          f"{' '.join(str(error).split())}") from None
    encode_obs, decode_actions = host_env.encode_obs, host_env.decode_actions
    try:
        obs, _ = env.reset(seed=seed)
        frames = [np.asarray(env.render())]
        for step in range(max_steps):
            action = decode_actions(np.asarray(act(encode_obs(np.asarray(obs)[None]), step)))[0]
            obs, _, terminated, truncated, _ = env.step(action)
            frames.append(np.asarray(env.render()))
            if terminated or truncated:
                break
        return frames
    finally:
        env.close()


class ClassicControlRenderer:
    """Draws the states of one gymnax classic-control env as RGB arrays [H, W, 3]."""

    def __init__(self, name: str) -> None:
        if name not in _CLASSIC:
            known = ", ".join(sorted(_CLASSIC))
            raise RenderError(f"env {name!r} cannot be rendered; renderable: {known} and "
                              "gymnasium: envs")
        _headless()
        try:
            import pygame  # noqa: F401  (Gymnasium draws with it)
        except ImportError:
            raise RenderError('rendering needs pygame: pip install -e ".[render]"') from None
        import gymnasium

        gym_id, self._to_gym = _CLASSIC[name]
        self._env = gymnasium.make(gym_id, render_mode="rgb_array").unwrapped
        self._env.reset(seed=0)

    def frame(self, state: Any) -> np.ndarray:
        state = base_state(state)
        self._env.state = np.asarray([float(v) for v in self._to_gym(state)], np.float64)
        if hasattr(state, "last_u"):  # the pendulum draws the last torque
            self._env.last_u = float(state.last_u)
        return np.asarray(self._env.render())

    def close(self) -> None:
        self._env.close()


class BraxRenderer:
    """Draws the states of a Brax env with Brax's own MuJoCo renderer (headless via EGL)."""

    def __init__(self, env: Any, height: int = 240, width: int = 320) -> None:
        from brax.io import image  # MuJoCo's OpenGL platform: see envs.brax_env

        self._render = lambda pipeline_state: image.render_array(
            env.brax_env.sys, pipeline_state, height=height, width=width)

    def frame(self, state: Any) -> np.ndarray:
        physics = base_state(state).physics  # envs.brax_env.BraxEnvState
        try:
            return np.asarray(self._render(physics.pipeline_state))
        except Exception as error:  # no OpenGL context on this machine, for one
            raise RenderError(f"Brax could not render: {type(error).__name__}: "
                              f"{' '.join(str(error).split())[:200]}") from None

    def close(self) -> None:
        pass


class JaxMarlRenderer:
    """Draws MPE and SMAX states (`jaxrl_sys.envs.jaxmarl_env`) with matplotlib, off screen."""

    def __init__(self, env: Any, size: int = 320) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self._env, self._plt = env, plt
        self._figure, self._axes = plt.subplots(figsize=(size / 80, size / 80), dpi=80)

    def frame(self, state: Any) -> np.ndarray:
        from matplotlib.patches import Circle

        inner, env = base_state(state).inner, self._env.inner
        axes = self._axes
        axes.clear()
        axes.set_xticks([])
        axes.set_yticks([])
        if self._env.smax:
            units = getattr(inner, "state", inner)
            axes.set_xlim(0, env.map_width)
            axes.set_ylim(0, env.map_height)
            for pos, alive, team in zip(np.asarray(units.unit_positions),
                                        np.asarray(units.unit_alive),
                                        np.asarray(units.unit_teams)):
                if alive:
                    axes.add_patch(Circle(pos, 0.6, color="tab:blue" if team == 0 else "tab:red"))
        else:
            axes.set_xlim(-2, 2)
            axes.set_ylim(-2, 2)
            for pos, radius, colour in zip(np.asarray(inner.p_pos), np.asarray(env.rad),
                                           np.asarray(env.colour)):
                axes.add_patch(Circle(pos, float(radius), color=np.asarray(colour) / 255))
        self._figure.canvas.draw()
        return np.asarray(self._figure.canvas.buffer_rgba())[..., :3].copy()

    def close(self) -> None:
        self._plt.close(self._figure)


def write_gif(frames: list[np.ndarray], path: str, fps: int = 30) -> None:
    """Frames [H, W, 3] uint8 to an animated GIF (Pillow)."""
    try:
        from PIL import Image
    except ImportError:
        raise RenderError('writing GIFs needs Pillow: pip install -e ".[render]"') from None
    images = [Image.fromarray(np.asarray(f, np.uint8)) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps),
                   loop=0)
