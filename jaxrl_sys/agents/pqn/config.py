"""PQN's hyper-parameters and the checks that reject values which cannot work."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.policy_gradient import OPTIMIZERS
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS

PQN_TORSOS = ("mlp", "grid_cnn")  # a normalised layer after each dense layer of either


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """PQN hyper-parameters (Gallici et al. 2024); the defaults solve CartPole-v1 (per-env
    ones: defaults.py). No replay and no target network: many envs, Q(lambda) targets over
    each rollout, a few epochs of minibatches on it, LayerNorm in the Q-network."""

    total_steps: int = 200_000
    num_envs: int = 32
    rollout_steps: int = 32
    update_epochs: int = 4
    num_minibatches: int = 4  # of every env's steps, permuted inside each env
    learning_rate: float = 1e-3
    anneal_lr: bool = True  # linearly to 0 over every gradient step
    max_grad_norm: float = 10.0
    optimizer: str = "adam"  # or "rmsprop" (`families.policy_gradient.build_optimizer`)
    gamma: float = 0.99
    reward_scale: float = 1.0  # rewards are multiplied by this before the targets
    q_lambda: float = 0.65  # Q(lambda)'s lambda: 0 is one-step Q-learning
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.2  # of total_steps, linear
    hidden: tuple[int, ...] = (128, 128)
    activation: str = "relu"
    layer_norm: bool = True
    torso: str = "mlp"  # or "grid_cnn" (MinAtar): a 3x3 conv before the normalised layers
    # lax.scan's unroll of the rollout loop (0: the backend's; speed only, as PPO's)
    rollout_unroll: int = 0

    @property
    def memory(self) -> str:
        """PQN's network has no memory (the policy-gradient family's minibatching reads it)."""
        return "none"

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "update_epochs",
                       "num_minibatches")
        check_at_least(self, 0, "rollout_unroll")
        check_budget(self)
        if self.rollout_steps % self.num_minibatches:
            raise ConfigError(f"rollout_steps={self.rollout_steps} must be divisible by "
                              f"num_minibatches={self.num_minibatches}")
        check_positive(self, "learning_rate", "max_grad_norm", "reward_scale")
        check_unit_interval(self, "gamma", "q_lambda", "epsilon_start", "epsilon_end",
                            "exploration_fraction")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "torso", PQN_TORSOS)
        check_layer_widths(self, "hidden")
        if not isinstance(self.layer_norm, bool):
            raise ConfigError(f"layer_norm must be true or false, got {self.layer_norm!r}")
