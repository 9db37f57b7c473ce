"""IMPALA's hyper-parameters and the checks that reject values which cannot work."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.families.policy_gradient import OPTIMIZERS
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS, TORSOS


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """IMPALA hyper-parameters; the defaults solve CartPole-v1 (per-env ones: defaults.py)."""

    total_steps: int = 150_000
    num_envs: int = 32
    rollout_steps: int = 32
    update_epochs: int = 1  # passes over each rollout; IMPALA makes one
    num_minibatches: int = 1  # gradient steps per pass, each on num_envs / num_minibatches envs
    learning_rate: float = 2.5e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    vtrace_lambda: float = 1.0  # the traces' lambda (Remark 2 of the paper); 1 is plain V-trace
    rho_bar: float = 1.0  # importance weights of the TD errors and the advantage clipped here
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    optimizer: str = "adam"  # or "rmsprop" (`families.policy_gradient.build_optimizer`)
    reward_scale: float = 1.0
    hidden: tuple[int, ...] = (32, 32)
    activation: str = "tanh"
    torso: str = "mlp"  # or "nature_cnn" (Atari frames), "grid_cnn" (MinAtar): shared by both heads
    # lax.scan's unroll of the rollout loop (0: the backend's; speed only, as PPO's)
    rollout_unroll: int = 0

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps", "update_epochs",
                       "num_minibatches")
        check_at_least(self, 0, "rollout_unroll")
        check_budget(self)
        if self.num_envs % self.num_minibatches:
            raise ConfigError(f"num_envs={self.num_envs} must be divisible by "
                              f"num_minibatches={self.num_minibatches}")
        check_positive(self, "learning_rate", "max_grad_norm", "rho_bar", "reward_scale")
        check_at_least(self, 0, "vf_coef", "ent_coef")
        check_unit_interval(self, "gamma", "vtrace_lambda")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "optimizer", OPTIMIZERS)
        check_choice(self, "torso", TORSOS)
        check_layer_widths(self, "hidden")
