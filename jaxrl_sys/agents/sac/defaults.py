"""SAC's shipped per-env defaults as data, and the envs they are promised to learn.

Each `Tuned` entry lists the config fields its env changes and what they reached; how each
was found is in docs/notes/sac.md.
"""

from __future__ import annotations

from jaxrl_sys.agents.sac.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "Pendulum-v1"

DEFAULT_EVAL_EPISODES = 0  # training returns already measure SAC's (stochastic) policy

PLAYS = "single"  # what it learns (core.types.PLAYS)
MEMORY = "none"  # whether its network is recurrent (core.types.MEMORY)

TUNED: tuple[Tuned, ...] = (
    Tuned("Pendulum-v1", {},
          "greedy -149.3 mean, 16/16 seeds past -200 at 30k steps (results/check_learning.md)"),
    Tuned("MountainCarContinuous-v0", dict(total_steps=100_000, noise_correlation=0.95),
          "greedy 94.6 mean, 16/16 seeds past 90 at 100k steps "
          "(results/check_learning_epyc.md)"),
    Tuned("gymnasium:Pendulum-v1", dict(rollout_steps=10),
          "host loop, short rollouts keep the acting policy fresh; no recorded figure "
          "(docs/notes/sac.md)"),
    Tuned("brax:*", dict(total_steps=300_000, num_envs=128, rollout_steps=8,
                         updates_per_step=32, buffer_size=2**20, batch_size=256,
                         learning_starts=8192, actor_learning_rate=3e-4,
                         critic_learning_rate=3e-4, alpha_learning_rate=3e-4,
                         hidden=(256, 256), initial_alpha=1.0, normalize_obs=True),
          "hopper (spring) 405.7 ± 38.7 at 300k steps, Brax's SAC 361.7 (docs/benchmarks.md); "
          "not tuned per task"),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("Pendulum-v1", -200.0, overrides=(("total_steps", 20_000),),
                    note="20k of the shipped 30k steps "
                         "(results/check_learning_shorter_promises.md)"),
    LearningPromise("MountainCarContinuous-v0", 90.0,
                    note="the flag is worth 100; correlated exploration noise finds it; the "
                         "path the suite trains on Pendulum-v1; 16 seeds per setting: "
                         "results/check_learning_epyc.md", test_seeds=0),
)


def default_config(env_name: str) -> Config:
    """The SAC config for `env_name`: shared defaults with that env's tuned overrides."""
    return tuned_config(Config(), TUNED, env_name)
