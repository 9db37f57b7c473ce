"""DQN's shipped per-env defaults as data, and the envs its learning check holds them to.

Each `Tuned` entry lists the config fields one env (or a `*` family) sets on top of `Config`
and one line of what they reached; how each was found is in docs/notes/dqn.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_sys.agents.dqn.config import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "CartPole-v1"

# MinAtar-paper-like DQN: replay 100k, lr 2.5e-4, epsilon to 0.05 over the first 10%, one
# update of 64 per 4 env steps, 3-step returns, two layers of 256 on the flattened frame
_MINATAR: dict[str, Any] = dict(
    total_steps=1_000_000, num_envs=32, rollout_steps=1, updates_per_iteration=8,
    batch_size=64, buffer_size=100_000, learning_starts=5_000, learning_rate=2.5e-4,
    anneal_lr=False, gamma=0.99, n_step=3, target_update_period=500, tau=1.0, huber_delta=1.0,
    exploration_fraction=0.1, epsilon_end=0.05, hidden=(256, 256),
)

# Dopamine's MinAtar DQN: the MinAtar paper's conv torso (one 3x3 conv of 16, then 128 units),
# 1-step targets, batch 32, a target copy every 250 updates (1000 env steps), epsilon to 0.01
_MINATAR_DOPAMINE: dict[str, Any] = {
    **_MINATAR, "torso": "grid_cnn", "hidden": (128,), "n_step": 1, "batch_size": 32,
    "target_update_period": 250, "epsilon_end": 0.01,
}

TUNED: tuple[Tuned, ...] = (
    # v_min/v_max: the support of `--set distributional=c51` (CleanRL's C51 on both envs)
    Tuned("CartPole-v1", dict(v_min=-100.0, v_max=100.0),
          "greedy 500.0 ± 0.0 over 4 seeds at 200k steps (results/classic.md); learning check "
          "16/16 native and AVX2, mean final 499.3 (docs/notes/dqn.md)"),
    # rl-baselines3-zoo's DQN Acrobot settings: one update of 128 per env step, a hard target
    # copy every 250 updates, 1-step targets
    Tuned("Acrobot-v1", dict(
        total_steps=100_000, num_envs=8, rollout_steps=1, updates_per_iteration=8,
        batch_size=128, buffer_size=50_000, learning_starts=1_000, learning_rate=6.3e-4,
        anneal_lr=False, gamma=0.99, n_step=1, target_update_period=250, tau=1.0,
        huber_delta=1.0, exploration_fraction=0.12, epsilon_end=0.1, hidden=(256, 256),
        v_min=-100.0, v_max=100.0,
    ), "greedy -72.7 ± 2.4 over 4 seeds at 100k steps (results/classic.md)"),
    # Ape-X's per-env epsilons (0.4 ** (1 + 7 i / (N - 1))): the envs with large epsilons find
    # the flag that an annealed epsilon rarely reaches
    Tuned("MountainCar-v0", dict(exploration="apex", total_steps=400_000),
          "greedy -128.1 over 4 seeds at 400k steps (-200.0, -107.8, -102.9, -101.7; the "
          "annealed epsilon: -181.7; docs/notes/dqn.md)"),
    # host loop: one worker process per env; the same updates per env step as on device
    Tuned("gymnasium:CartPole-v1",
          dict(num_envs=8, rollout_steps=16, updates_per_iteration=16),
          "no figure recorded; tests/test_host_loop.py trains it past its warm-up"),
    Tuned("*-MinAtar", _MINATAR,
          "greedy over 4 seeds at 1M steps: Breakout 63.7 ± 21.0, SpaceInvaders 108.8 ± 46.2 "
          "(results/minatar.md)"),
    # Dopamine's MinAtar DQN with advantage learning, which widens Freeway's small action gaps
    Tuned("Freeway-MinAtar", {**_MINATAR_DOPAMINE, "advantage_learning": 0.9},
          "greedy 61.0 ± 1.1 over 4 seeds at 1M steps (results/minatar.md)"),
    Tuned("Asterix-MinAtar", _MINATAR_DOPAMINE,
          "greedy 21.5 ± 3.9 over 4 seeds at 1M steps (results/minatar.md)"),
    Tuned("*-bsuite", dict(total_steps=300_000, learning_starts=2_000),
          "not measured: CartPole's settings with a longer budget for bsuite's small tasks"),
    Tuned("*-popgym", dict(total_steps=1_000_000, hidden=(128, 128), buffer_size=100_000),
          "not measured: POPGym's tasks need memory, which DQN has none of (r2d2 has)"),
)

PROMISES: tuple[LearningPromise, ...] = (LearningPromise("CartPole-v1", 475.0),)


def default_config(env_name: str) -> Config:
    """The DQN config for `env_name`: `Config`'s defaults with that env's `TUNED` overrides."""
    return tuned_config(Config(), TUNED, env_name)


# Rainbow (Hessel et al. 2018) as DQN's options all on: C51 on each env's support, noisy
# dueling heads exploring in place of epsilon, double Q, 3-step returns, prioritised replay
RAINBOW: dict[str, Any] = dict(distributional="c51", noisy=True, dueling=True, double_q=True,
                               n_step=3, prioritized=True, epsilon_start=0.0, epsilon_end=0.0,
                               exploration="schedule")

# a good MinAtar policy's discounted returns pass C51's [-10, 10]: the support "Revisiting
# Rainbow" (Obando-Ceron and Castro 2021) trains MinAtar on
_RAINBOW_MINATAR: dict[str, Any] = dict(v_min=-100.0, v_max=100.0)

# Rainbow's own choices for an env, over DQN's entry and `RAINBOW`: Asterix keeps the 1-step
# targets of DQN's entry, with which Rainbow learns it where 3-step returns do not
# (results/rainbow.md); Freeway drops DQN's advantage learning, which needs one value per
# action and C51 has a distribution
_RAINBOW_OWN: dict[str, dict[str, Any]] = {
    "Asterix-MinAtar": dict(n_step=1),
    "Freeway-MinAtar": dict(advantage_learning=0.0),
}

# Rainbow's entries: DQN's (with MinAtar's support), with what Rainbow reached on them
_RAINBOW_REACHED = {
    "CartPole-v1": "greedy 500.0 over 4 seeds at 200k steps (results/rainbow.md)",
    "Acrobot-v1": "greedy -67.6 over 4 seeds at 100k steps (results/rainbow.md)",
    "*-MinAtar": "greedy 48.1 over 4 seeds at 1M steps on Breakout-MinAtar (40.0, 89.0, 34.0, "
                 "29.5; on [-10, 10]: 29.6), below DQN's 63.7 (results/rainbow.md); "
                 "SpaceInvaders and Seaquest not measured",
    "Asterix-MinAtar": "greedy 40.3 over 4 seeds at 1M steps (37.2, 38.9, 49.2, 35.8; with "
                       "3-step returns 2.1 at 650k), above DQN's 21.5 (results/rainbow.md)",
}


def _rainbow_overrides(entry: Tuned) -> dict[str, Any]:
    """Rainbow's overrides for DQN's `entry`: its fields, `RAINBOW`'s options, MinAtar's
    support on `*-MinAtar` envs, then Rainbow's own choices for that env."""
    minatar = _RAINBOW_MINATAR if entry.env.endswith("-MinAtar") else {}
    return {**entry.overrides, **RAINBOW, **minatar, **_RAINBOW_OWN.get(entry.env, {})}


RAINBOW_TUNED: tuple[Tuned, ...] = tuple(
    Tuned(entry.env, _rainbow_overrides(entry),
          _RAINBOW_REACHED.get(entry.env, f"{NOT_MEASURED}: DQN's entry with Rainbow's options"))
    for entry in TUNED
)


RAINBOW_PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, overrides=(("total_steps", 150_000),), chunks=15,
                    note="150k of the shipped 200k steps; 16 seeds: native pass, AVX 2 "
                         "collapsed at the last evaluation (results/rainbow.md)"),
)


def rainbow_config(env_name: str) -> Config:
    """Rainbow's config for `env_name`: its entry (DQN's with `RAINBOW`'s options on top), or
    `Config` with those options where no entry applies."""
    return tuned_config(dataclasses.replace(Config(), **RAINBOW), RAINBOW_TUNED, env_name)
