"""R2D2's hyper-parameters: the Q-learning family's config with R2D2's sequences, recurrent
core and sequence priorities."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.q_learning import ApeXQConfig
from jaxrl_sys.core.config import ConfigError, check_at_least, check_choice, check_unit_interval
from jaxrl_sys.core.networks import MEMORIES

RECURRENT = tuple(m for m in MEMORIES if m != "none")  # R2D2's core is always recurrent


@dataclasses.dataclass(frozen=True)
class Config(ApeXQConfig):
    """R2D2 hyper-parameters; the defaults learn MemoryChain-bsuite (greedy evaluation).

    One iteration steps every env `seq_length` times and stores one replay item per env: the
    `burn_in` steps before them (replayed only to warm the recurrent state) and those
    `seq_length` steps (learned from), with the state before the item's first step.
    """

    total_steps: int = 500_000
    seq_length: int = 16  # steps per env per iteration, and the learned steps of an item
    burn_in: int = 8  # earlier steps per item that only warm the state (no gradient)
    updates_per_iteration: int = 2
    buffer_size: int = 2_048  # replay items (sequences) per seed, over all envs
    batch_size: int = 32  # sequences, global, split over devices
    learning_starts: int = 5_000
    anneal_lr: bool = False
    huber_delta: float = 1.0
    # prioritised sequences: priority eta * max |TD| + (1 - eta) * mean |TD| over the item
    priority_alpha: float = 0.9
    priority_beta_start: float = 0.6
    priority_eta: float = 0.9
    hidden: tuple[int, ...] = (64,)  # the torso's widths; the last is also the post-core layer
    memory: str = "gru"  # or "lstm"
    memory_size: int = 64  # units of the recurrent core

    @property
    def rollout_steps(self) -> int:
        """Steps per env per iteration (`RolloutBudget`'s name for `seq_length`)."""
        return self.seq_length

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "seq_length", "memory_size")
        check_at_least(self, 0, "burn_in")
        super().validate()
        if self.burn_in > self.seq_length:
            raise ConfigError(f"burn_in={self.burn_in} must be <= seq_length={self.seq_length} "
                              "(the burn-in steps are the previous iteration's last ones)")
        if self.n_step > self.seq_length:
            raise ConfigError(f"n_step={self.n_step} must be <= seq_length={self.seq_length} "
                              "(n-step targets are taken inside a sequence)")
        if self.buffer_size < self.num_envs:
            raise ConfigError(f"buffer_size={self.buffer_size} must hold at least one sequence "
                              f"of each of the num_envs={self.num_envs} envs")
        check_unit_interval(self, "priority_eta")
        check_choice(self, "memory", RECURRENT)
