"""QMIX's and VDN's hyper-parameters: the Q-learning family's config with replay items of
sequences, an optional recurrent core and the mixer."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.q_learning import QLearningConfig
from jaxrl_sys.core.config import ConfigError, check_at_least, check_choice, check_positive
from jaxrl_sys.core.networks import MEMORIES

MIXERS = ("qmix", "vdn")  # a monotonic hypernetwork mixer on the world state, or the sum
OPTIMIZERS = ("radam", "adam")


@dataclasses.dataclass(frozen=True)
class Config(QLearningConfig):
    """QMIX (`mixer="qmix"`) or VDN (`mixer="vdn"`) hyper-parameters; the defaults learn MPE
    simple_spread (per-env ones: defaults.py), starting from JaxMARL's Q-learning baselines.

    One iteration steps every env `rollout_steps` times and stores its steps in replay as
    items of `seq_length` steps (learned from), each with the `burn_in` steps before it (replayed
    only to warm a recurrent state) and the state before the first of those. A feed-forward
    network (`memory="none"`) learns from single joint transitions with `seq_length=1`.
    """

    total_steps: int = 5_000_000
    rollout_steps: int = 16  # steps per env per iteration
    seq_length: int = 1  # learned steps of a replay item; divides rollout_steps
    burn_in: int = 0  # earlier steps per item that only warm the recurrent state
    buffer_size: int = 100_000  # replay items (of seq_length steps) per seed, over all envs
    batch_size: int = 128  # items, global, split over devices
    learning_starts: int = 10_000
    learning_rate: float = 0.005
    optimizer: str = "radam"
    max_grad_norm: float = 25.0
    gamma: float = 0.9
    n_step: int = 1  # n-step team returns inside an item
    target_update_period: int = 200
    tau: float = 1.0
    exploration_fraction: float = 0.1
    reward_scale: float = 1.0
    hidden: tuple[int, ...] = (64, 64)  # the agents' torso widths (shared by every agent)
    memory: str = "none"  # or "gru", "lstm": a recurrent core after the torso
    memory_size: int = 64
    mixer: str = "qmix"  # or "vdn"
    mixer_embedding: int = 32  # QMIX's mixing layer width
    mixer_hypernet_hidden: int = 128  # hidden width of the hypernetworks of the mixing weights
    mixer_init_scale: float = 0.001  # orthogonal gain of the hypernetworks' layers

    @property
    def items_per_iteration(self) -> int:
        """Replay items each env writes per iteration."""
        return self.rollout_steps // self.seq_length

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "rollout_steps", "seq_length", "memory_size",
                       "mixer_embedding", "mixer_hypernet_hidden")
        check_at_least(self, 0, "burn_in")
        super().validate()
        if self.rollout_steps % self.seq_length:
            raise ConfigError(f"seq_length={self.seq_length} must divide "
                              f"rollout_steps={self.rollout_steps} (items are its pieces)")
        if self.burn_in > self.seq_length:
            raise ConfigError(f"burn_in={self.burn_in} must be <= seq_length={self.seq_length} "
                              "(an item's burn-in is the steps just before it)")
        if self.memory == "none" and self.burn_in:
            raise ConfigError(f"burn_in={self.burn_in} is for a recurrent network; "
                              "memory=none has no state to warm")
        if self.n_step > self.seq_length:
            raise ConfigError(f"n_step={self.n_step} must be <= seq_length={self.seq_length} "
                              "(n-step targets are taken inside an item)")
        if self.buffer_size < self.num_envs * self.items_per_iteration:
            raise ConfigError(f"buffer_size={self.buffer_size} must hold one iteration's items "
                              f"of every env ({self.num_envs * self.items_per_iteration})")
        check_positive(self, "reward_scale", "mixer_init_scale")
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "memory", MEMORIES)
        check_choice(self, "mixer", MIXERS)
