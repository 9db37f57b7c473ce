"""R2D2's shipped per-env defaults as data, and the envs its learning check holds them to.

Each `Tuned` entry lists the config fields one env (or a `*` family) sets on top of `Config`
and one line of what they reached; how each was found is in docs/notes/r2d2.md.
"""

from __future__ import annotations

from jaxrl_sys.agents.r2d2.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "MemoryChain-bsuite"

TUNED: tuple[Tuned, ...] = (
    Tuned("MemoryChain-bsuite", {},
          "memory_length 5: greedy 1.0 on each of 4 seeds at 500k steps, 1.0 from the first "
          "chunk (25k steps) on; memory_length 30 needs longer sequences (docs/notes/r2d2.md)"),
    Tuned("*-bsuite", {},
          "not measured: MemoryChain's settings for the other bsuite tasks"),
    Tuned("*-popgym", dict(total_steps=1_000_000, memory_size=128, hidden=(128,)),
          "not measured: MemoryChain's settings, wider and twice as long, for POPGym"),
    Tuned("*-MinAtar",
          dict(total_steps=5_000_000, num_envs=64, torso="grid_cnn", hidden=(256,),
               memory_size=256, learning_rate=2.5e-4, buffer_size=8_192, batch_size=64,
               learning_starts=20_000, target_update_period=500, tau=1.0,
               exploration="apex"),
          "not measured: R2D2's Ape-X exploration and hard target copies at MinAtar's size"),
)

# two seeds: the case then trains in under a minute on two CPU cores
PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("MemoryChain-bsuite", 0.9, overrides=(("total_steps", 100_000),),
                    note="100k of the shipped 500k steps: every seed is at 1.0 from the first "
                         "chunks (results/check_learning_shorter_promises.md)"),
)


def default_config(env_name: str) -> Config:
    """The R2D2 config for `env_name`: `Config`'s defaults with that env's `TUNED` overrides."""
    return tuned_config(Config(), TUNED, env_name)
