"""The best mean return any policy can get on gymnax's Pendulum-v1, by dynamic programming.

`python benchmarks/pendulum_optimum.py [--grid 720x641] [--torques 41] [--starts 4096]`

Pendulum's state is two numbers (angle, speed), so its 200-step optimal control can be
solved on a grid: backward value iteration with gymnax's own `step_env` and bilinear
interpolation. The DP's greedy policy is then run on the exact dynamics from the env's random
starts; its mean return is achievable, and it converges as the grid is refined, so it tells
what a published return can be compared with (gymnax-blines' PPO figure is -130).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

import jax
import jax.numpy as jnp

from jaxrl_sys.runtime.cli import run_script

EVAL_EPISODES = 164  # gymnax-blines' num_test_rollouts, behind gymnax's published returns
SPEED_LIMIT = 8.0  # gymnax's max_speed: speeds are clipped to it, so the grid covers it


class OptimumError(Exception):
    """Bad input: one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise OptimumError(message)


def _parse_grid(text: str) -> tuple[int, int]:
    try:
        angles, speeds = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise OptimumError(f"--grid {text!r}: expected ANGLESxSPEEDS, e.g. 720x641") from None
    if angles < 8 or speeds < 8:
        raise OptimumError(f"--grid {text!r}: at least 8 points per axis")
    return angles, speeds


def solve(angles: int, speeds: int, torques: int, horizon: int):
    """Backward value iteration: the env and its params, value tables V[t] (angle x speed,
    `horizon - t` steps to go), the torque grid, Q over it, and the batched step."""
    import gymnax  # the env's own dynamics and reward, not a copy
    from gymnax.environments.classic_control.pendulum import EnvState

    env, params = gymnax.make("Pendulum-v1")
    angle_grid = jnp.linspace(-jnp.pi, jnp.pi, angles, endpoint=False)
    speed_grid = jnp.linspace(-SPEED_LIMIT, SPEED_LIMIT, speeds)
    torque_grid = jnp.linspace(-params.max_torque, params.max_torque, torques)
    angle_cell, speed_cell = 2 * jnp.pi / angles, 2 * SPEED_LIMIT / (speeds - 1)

    def step(theta, theta_dot, torque):
        """One step of gymnax's Pendulum (deterministic) from (angle, speed)."""
        state = EnvState(theta=theta, theta_dot=theta_dot, last_u=jnp.zeros(()), time=0)
        _, next_state, reward, _, _ = env.step_env(
            jax.random.PRNGKey(0), state, jnp.reshape(torque, (1,)), params)
        return next_state.theta, next_state.theta_dot, reward

    batched_step = jax.vmap(step)

    def interpolate(values, theta, theta_dot):
        x = ((theta + jnp.pi) % (2 * jnp.pi)) / angle_cell  # angles wrap round
        y = (theta_dot + SPEED_LIMIT) / speed_cell
        i0 = jnp.floor(x).astype(jnp.int32)
        j0 = jnp.clip(jnp.floor(y).astype(jnp.int32), 0, speeds - 2)
        fx, fy = x - i0, jnp.clip(y - j0, 0.0, 1.0)
        i0, i1 = i0 % angles, (i0 + 1) % angles
        return ((1 - fx) * (1 - fy) * values[i0, j0] + fx * (1 - fy) * values[i1, j0]
                + (1 - fx) * fy * values[i0, j0 + 1] + fx * fy * values[i1, j0 + 1])

    def action_values(values, theta, theta_dot):
        """Q(s, u) for every torque on the grid: reward plus interpolated value to go."""
        def one(torque):
            next_theta, next_dot, reward = batched_step(
                theta, theta_dot, jnp.broadcast_to(torque, theta.shape))
            return reward + interpolate(values, next_theta, next_dot)
        return jax.lax.map(one, torque_grid)

    thetas, theta_dots = (a.ravel() for a in jnp.meshgrid(angle_grid, speed_grid, indexing="ij"))
    backup = jax.jit(lambda v: action_values(v, thetas, theta_dots).max(0).reshape(angles, speeds))
    tables = [jnp.zeros((angles, speeds))]
    for _ in range(horizon):
        tables.append(backup(tables[-1]))
    tables.reverse()
    return env, params, tables, torque_grid, jax.jit(action_values), batched_step


def dp_policy_returns(angles: int, speeds: int, torques: int, starts: int,
                      seed: int) -> jax.Array:
    """Returns of the DP's greedy policy, run on the exact dynamics from `starts` of the
    env's random initial states (an achievable figure per episode)."""
    horizon = 200  # gymnax's max_steps_in_episode
    env, params, tables, torque_grid, action_values, batched_step = solve(
        angles, speeds, torques, horizon)
    keys = jax.random.split(jax.random.PRNGKey(seed), starts)
    initial = jax.vmap(env.reset_env, (0, None))(keys, params)[1]
    theta, theta_dot = initial.theta, initial.theta_dot
    total = jnp.zeros(starts)
    for t in range(horizon):
        torque = torque_grid[action_values(tables[t + 1], theta, theta_dot).argmax(0)]
        theta, theta_dot, reward = batched_step(theta, theta_dot, torque)
        total = total + reward
    return total


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = _Parser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", default="720x641", help="angle x speed points")
    p.add_argument("--torques", type=int, default=41, help="torques from -2 to 2")
    p.add_argument("--starts", type=int, default=4096, help="random starts to average over")
    p.add_argument("--seed", type=int, default=7)
    try:
        args = p.parse_args(argv)
        angles, speeds = _parse_grid(args.grid)
        if args.torques < 2 or args.starts < 1:
            raise OptimumError("--torques needs at least 2 and --starts at least 1")
    except OptimumError as e:
        print(f"pendulum_optimum.py: {e}", file=sys.stderr)
        return 2

    total = dp_policy_returns(angles, speeds, args.torques, args.starts, args.seed)
    error = total.std() / args.starts ** 0.5
    print(f"grid {angles}x{speeds}, {args.torques} torques, {args.starts} random starts "
          f"(seed {args.seed}): the DP's greedy policy on the exact dynamics averages "
          f"{total.mean():.1f} (standard error {error:.1f}; per episode from "
          f"{total.min():.1f} to {total.max():.1f})")
    draws = jax.random.choice(jax.random.PRNGKey(0), total, (20_000, EVAL_EPISODES)).mean(1)
    low, high = jnp.percentile(draws, jnp.array([5.0, 95.0]))
    print(f"a mean over {EVAL_EPISODES} of these episodes (gymnax-blines' evaluation) lies "
          f"between {low:.1f} and {high:.1f} in 90% of draws")
    return 0


if __name__ == "__main__":
    run_script(main)
