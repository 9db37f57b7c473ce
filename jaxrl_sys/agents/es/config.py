"""ES's hyper-parameters: a population of parameter vectors around a mean, each member's
episodes run on device, and the evosax strategy that moves the mean."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS

STRATEGIES = ("open_es", "ars")
OPTIMIZERS = ("adam", "sgd")


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """ES hyper-parameters; the defaults are OpenAI-ES on CartPole-v1 (per-env ones and ARS's:
    defaults.py). One iteration is one generation: every member plays `episodes_per_member`
    episodes of at most `rollout_steps` steps, all of them counted as env steps."""

    total_steps: int = 2_000_000
    population: int = 64  # members per generation, even (antithetic pairs)
    episodes_per_member: int = 1
    rollout_steps: int = 500  # steps each episode may take (the env's own limit or fewer)
    strategy: str = "open_es"  # or "ars" (Mania et al. 2018: top directions, obs normalised)
    noise_std: float = 0.05  # sigma of the perturbations
    learning_rate: float = 0.03
    # linearly to final_lr_fraction * learning_rate over the generations: the mean that greedy
    # evaluation plays settles instead of moving by full steps to the last generation
    anneal_lr: bool = False
    final_lr_fraction: float = 0.0
    optimizer: str = "adam"  # OpenAI-ES's; ARS's paper steps with plain SGD
    top_fraction: float = 0.5  # ARS: the share b/N of direction pairs kept, by max return
    weight_decay: float = 0.0  # OpenAI-ES's L2 penalty on the parameters (in the fitness)
    hidden: tuple[int, ...] = (32, 32)  # () is a linear policy, as ARS's
    activation: str = "tanh"
    normalize_obs: bool = False  # ARS V2: observations standardised by running statistics

    @property
    def num_envs(self) -> int:
        """Envs per generation: every member's every episode runs in an env of its own.

        Returns:
            `population * episodes_per_member`.
        """
        return self.population * self.episodes_per_member

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "episodes_per_member", "rollout_steps")
        check_at_least(self, 2, "population")
        if self.population % 2:
            raise ConfigError(f"population must be even (antithetic pairs), got "
                              f"{self.population}")
        check_budget(self)
        check_positive(self, "noise_std", "learning_rate")
        check_unit_interval(self, "top_fraction", "final_lr_fraction")
        if self.top_fraction <= 0:
            raise ConfigError("top_fraction must be above 0")
        if self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be at least 0, got {self.weight_decay}")
        check_choice(self, "strategy", STRATEGIES)
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "activation", ACTIVATIONS)
        if self.hidden:
            check_layer_widths(self, "hidden")
