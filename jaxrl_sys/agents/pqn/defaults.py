"""PQN's shipped per-env configs, as data: what each tuned env changes from `Config`'s
defaults, and what that reached."""

from __future__ import annotations

from jaxrl_sys.agents.pqn.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "CartPole-v1"

# MinAtar as purejaxql's PQN runs it: 128 envs of 32 steps, 2 epochs of 32 minibatches,
# lr 5e-4, lambda 0.65, epsilon to 0.05 over the first tenth; a conv before normalised layers
_MINATAR = dict(total_steps=10_000_000, num_envs=128, rollout_steps=32, update_epochs=2,
                num_minibatches=32, learning_rate=5e-4, epsilon_end=0.05,
                exploration_fraction=0.1, torso="grid_cnn", hidden=(128, 128))

TUNED: tuple[Tuned, ...] = (
    # purejaxql's CartPole choices of rewards scaled by 0.1, lambda 0.95 and a final epsilon
    # of 0.2, on a smaller budget (300k steps, lr 1e-3)
    Tuned("CartPole-v1",
          dict(total_steps=300_000, reward_scale=0.1, q_lambda=0.95, epsilon_end=0.2),
          "greedy 500.0 at 300k steps on each of seeds 0-15 natively; under AVX 16 of 16 "
          "reach 475, none collapses, worst final 452.7 (results/pqn.md)"),
    Tuned("*-MinAtar", _MINATAR, "greedy over 4 seeds at 10M steps: Breakout 98.1, Asterix "
          "70.8, Freeway 67.1 (results/pqn.md)"),
    Tuned("*-popgym", dict(total_steps=1_000_000),
          "not measured: POPGym's tasks need memory, which PQN has none of (ppo has)"),
    Tuned("*-bsuite", dict(total_steps=500_000), "not measured: CartPole's settings with a "
          "longer budget for bsuite's small tasks"),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0),
)


def default_config(env_name: str) -> Config:
    """The PQN config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)
