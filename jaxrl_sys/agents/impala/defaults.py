"""IMPALA's shipped per-env configs, as data: what each tuned env changes from `Config`'s
defaults, and what that reached."""

from __future__ import annotations

from jaxrl_sys.agents.impala.agent import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", dict(num_minibatches=4, reward_scale=0.1),
          "greedy 500.0 over 32 episodes on each of seeds 0-3 at 150k steps; 16/16 seeds "
          "greedy 500.0 (scripts/train.py --seeds 16 --eval-episodes 32)"),
    # host loop: one worker process per env, so 8 envs of 32 steps, one update per rollout
    Tuned("gymnasium:CartPole-v1", dict(num_envs=8, num_minibatches=1, reward_scale=0.1),
          "greedy 500.0 on seeds 0-7 at staleness 0, 1 and 4 (0-15 at 4); at staleness 16 "
          "2 of 8 reach 475 (docs/notes/ppo.md)"),
    Tuned("Breakout-MinAtar",
          dict(total_steps=10_000_000, num_envs=64, rollout_steps=32, num_minibatches=2,
               learning_rate=1e-3, hidden=(256, 256), activation="relu"),
          "greedy 10.0 over 4 seeds at 10M steps, reference 28 (docs/notes/impala.md)"),
    Tuned("*-MinAtar",
          dict(total_steps=10_000_000, num_envs=64, rollout_steps=32, num_minibatches=2,
               learning_rate=1e-3, hidden=(256, 256), activation="relu"),
          "not measured: Breakout's settings for the other MinAtar games"),
    Tuned("*-bsuite", dict(total_steps=500_000, reward_scale=1.0, hidden=(64, 64)),
          "not measured: CartPole's settings with a longer budget for bsuite's small tasks"),
    Tuned("*-popgym", dict(total_steps=1_000_000, hidden=(128, 128)),
          "not measured: POPGym's tasks need memory, which IMPALA has none of (ppo has)"),
    Tuned("brax:*",
          dict(total_steps=5_000_000, num_envs=2048, rollout_steps=16, num_minibatches=16,
               learning_rate=3e-4, anneal_lr=False, ent_coef=0.0, reward_scale=0.1,
               hidden=(64, 64)),
          "not measured: PPO's Brax batch with V-trace's single pass"),
)

# What the learning checks hold the shipped defaults to (jaxrl_sys.tools.learning_check)
PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0),
)


def default_config(env_name: str) -> Config:
    """The IMPALA config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)
