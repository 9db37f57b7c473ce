"""MuZero's hyper-parameters (`Config`) and the schedules read from them.

Per-env values live in defaults.py; this module holds the shared defaults and their checks.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval,
)
from jaxrl_sys.core.networks import ACTIVATIONS

DEFAULT_ENV = "CartPole-v1"
SEARCHES = ("gumbel", "muzero")
MODELS = ("learned", "env")
VALUE_BOOTSTRAPS = ("target", "search")
TORSOS = ("auto", "mlp", "conv")
LATENTS = ("vector", "planes")


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """MuZero hyper-parameters: the shared defaults (defaults.py sets each env's own)."""

    total_steps: int = 150_000
    num_envs: int = 32
    updates_per_iteration: int = 1  # gradient steps per vectorised env step
    batch_size: int = 256  # global, split over devices
    buffer_size: int = 100_000  # transitions per seed, over all envs
    learning_starts: int = 1_000  # env steps per seed before learning
    learning_rate: float = 3e-3
    anneal_lr: bool = True
    final_lr_fraction: float = 0.1
    weight_decay: float = 1e-4
    max_grad_norm: float = 5.0
    gamma: float = 0.98
    n_step: int = 16  # steps of real reward before the bootstrap
    unroll_steps: int = 5  # K
    # what an n-step value target bootstraps from: "target", the target network's value of
    # the state reached (one network pass per target in every update); "search", the root
    # value the acting search stored for that state (the paper's `root_values`: no network
    # pass, but values as old as the stored step)
    value_bootstrap: str = "target"
    # the weight of the stored search root value q of each position in its value target:
    # 0 trains on the n-step return z alone (a board game's result with n covering the game),
    # 0.5 on the mean of z and q (which trained connect-four AlphaZero faster in Oracle's
    # "Lessons from AlphaZero", part 4)
    value_target_mix: float = 0.0
    dynamics_grad_scale: float = 0.5
    value_loss_weight: float = 1.0
    value_max: float = 60.0  # |raw value| covered by the value support
    reward_max: float = 5.0  # |raw reward| covered by the reward support
    support_bins: int = 31  # bins of each categorical support (in h-space)
    search: str = "gumbel"  # or "muzero"
    # "learned": MuZero's dynamics network; "env": AlphaZero, the search steps the real
    # pure-JAX env (its state is the tree's embedding)
    model: str = "learned"
    # learned model only: heads that predict the legal moves of a latent state and whether a
    # move ends the episode, trained on the stored masks and terminations; inside the tree
    # predicted-illegal moves get no prior and predicted ends are absorbing (as with model=env)
    rule_heads: bool = False
    rule_loss_weight: float = 1.0
    # EfficientZero's self-supervised consistency: each latent the dynamics predict is pulled
    # (negative cosine similarity, SimSiam projections) towards the representation of the
    # observation actually reached; 0 turns it off (EfficientZero weighs it 2)
    consistency_loss_weight: float = 0.0
    # each latent, the representation's and every one the dynamics predict, is decoded into
    # the observation it stands for (squared error, mean over the observation's entries), so
    # that the latents keep the board's contents and the dynamics learn how moves change it;
    # 0 turns it off
    reconstruction_loss_weight: float = 0.0
    # the decoder's hidden layers: None takes `hidden`'s widths, () makes it one linear map
    # from the latent to the observation (about a seventh of the cost of two layers of 256)
    decoder_hidden: tuple[int, ...] | None = None
    num_simulations: int = 16
    max_considered_actions: int = 16  # gumbel only
    # gumbel only: 0 rescales each node's Q-values by their min and max (mctx's default);
    # > 0 divides them by this fixed range instead, which stays well defined with 2 actions
    q_range: float = 0.0
    # gumbel only: the weight of the (rescaled) completed Q against the prior logits in the
    # root's choice and the policy target, per visit (Gumbel MuZero's c_scale; mctx's 0.1)
    value_scale: float = 0.1
    dirichlet_alpha: float = 0.25  # muzero search only
    dirichlet_fraction: float = 0.25  # muzero search only
    # acting temperature (gumbel noise scale for gumbel search, visit-count temperature for
    # muzero search): temperatures[i] from progress temperature_milestones[i-1] on
    temperatures: tuple[float, ...] = (1.0, 0.5, 0.25)
    temperature_milestones: tuple[float, ...] = (0.5, 0.75)
    target_update_period: int = 100  # gradient steps between target-network copies
    # the first plies of every episode are uniform random legal moves (self-play openings
    # the search alone would never try; their policy targets are still the search's)
    opening_plies: int = 0
    # games whose spec declares a mirror image (`EnvSpec.mirror_axes`: connect four,
    # tic-tac-toe): every other sampled row is trained on as its mirror image, twice the
    # distinct positions from the same self-play (AlphaGo Zero's symmetry augmentation)
    mirror_augment: bool = False
    priority_alpha: float = 0.5
    priority_beta_start: float = 0.4  # annealed to 1 over training
    # fraction of sampled rows (every round(1/f)-th) whose policy targets are searched afresh
    reanalyse_fraction: float = 0.0
    latent_dim: int = 64
    hidden: tuple[int, ...] = (64,)  # layers of each of the three MLPs
    activation: str = "relu"
    torso: str = "auto"  # "conv" for image observations, "mlp" otherwise
    conv_channels: int = 32
    res_blocks: int = 2
    # the learned model's state: "vector", latents [D] from the torso and an MLP dynamics;
    # "planes", latents that keep the board's [H, W, conv_channels] planes (a conv
    # representation of `res_blocks` residual blocks, whatever `torso` says) and dynamics of
    # `res_blocks` residual convs with the move as one-hot planes (the paper's board-game
    # model; image observations). AlphaZero mode learns no dynamics and keeps `torso`.
    latent: str = "vector"

    @property
    def steps_per_iteration(self) -> int:
        """Env steps of one iteration: one step of every env."""
        return self.num_envs

    @property
    def warmup_iterations(self) -> int:
        """Iterations before the first learner step: the last of them brings the env steps
        taken to `learning_starts`, so learning starts in the iteration after."""
        return max(0, -(-self.learning_starts // self.steps_per_iteration) - 1)

    @property
    def learner_steps(self) -> int:
        """Gradient updates in `num_iterations` iterations: `updates_per_iteration` in each
        one after the warm-up (the learning-rate schedule's length)."""
        return max(0, self.num_iterations - self.warmup_iterations) * self.updates_per_iteration

    @property
    def replay_reuse(self) -> float:
        """How many times, on average, the learner trains on each stored step as a position
        of its unrolls: every iteration stores `num_envs` steps and reads `batch_size` rows
        of `unroll_steps + 1` positions `updates_per_iteration` times (uniform sampling; a
        full replay drops rows as fast as it stores them). Monte-Carlo value targets of a
        board game overfit their replay when this is large."""
        return (self.updates_per_iteration * self.batch_size * (self.unroll_steps + 1)
                / self.num_envs)

    @property
    def plane_latents(self) -> bool:
        """Whether the learned model keeps its latents as planes (`latent`)."""
        return self.latent == "planes" and self.model == "learned"

    @property
    def learns_rules(self) -> bool:
        """Whether the learned model has rule heads (the env model knows the rules)."""
        return self.rule_heads and self.model == "learned"

    @property
    def sequence_length(self) -> int:
        """Stored steps read per sample: K unroll steps plus n steps of the last target,
        plus the state the last target bootstraps from when its stored search value is used."""
        return self.unroll_steps + self.n_step + (self.value_bootstrap == "search")

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "updates_per_iteration",
                       "batch_size", "n_step", "unroll_steps", "num_simulations",
                       "max_considered_actions", "target_update_period", "latent_dim",
                       "conv_channels")
        check_budget(self)
        check_at_least(self, 0, "learning_starts", "res_blocks", "opening_plies", "q_range",
                       "weight_decay", "consistency_loss_weight",
                       "reconstruction_loss_weight")
        check_at_least(self, 3, "support_bins")
        if self.buffer_size < self.num_envs * self.sequence_length:
            raise ConfigError(f"buffer_size={self.buffer_size} must hold at least "
                              f"unroll_steps + n_step steps of every env")
        check_positive(self, "value_scale", "learning_rate", "max_grad_norm", "value_max",
                       "reward_max", "dirichlet_alpha", "value_loss_weight", "rule_loss_weight")
        check_unit_interval(self, "gamma", "final_lr_fraction", "dynamics_grad_scale",
                            "dirichlet_fraction", "priority_alpha", "priority_beta_start",
                            "reanalyse_fraction", "value_target_mix")
        check_choice(self, "search", SEARCHES)
        check_choice(self, "model", MODELS)
        check_choice(self, "value_bootstrap", VALUE_BOOTSTRAPS)
        check_choice(self, "torso", TORSOS)
        check_choice(self, "latent", LATENTS)
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
        if self.model == "env" and self.consistency_loss_weight > 0:
            raise ConfigError("consistency_loss_weight needs model='learned': the env model "
                              "has no latent dynamics to train")
        if self.model == "env" and self.reconstruction_loss_weight > 0:
            raise ConfigError("reconstruction_loss_weight needs model='learned': the env "
                              "model has no latents to decode (--agent alphazero takes "
                              "this env's entry without it)")
        if self.decoder_hidden is not None and self.reconstruction_loss_weight == 0:
            raise ConfigError("decoder_hidden needs reconstruction_loss_weight > 0: there is "
                              "no decoder without the reconstruction loss")
        if self.decoder_hidden and min(self.decoder_hidden) < 1:
            raise ConfigError(f"decoder_hidden must be positive layer widths, got "
                              f"{self.decoder_hidden}")
        if self.model == "env" and self.reanalyse_fraction > 0:
            raise ConfigError("reanalyse_fraction needs model='learned': replay keeps no env "
                              "states to search from")
        if len(self.temperatures) != len(self.temperature_milestones) + 1:
            raise ConfigError("temperatures needs one more entry than temperature_milestones")
        if any(t < 0 for t in self.temperatures):
            raise ConfigError(f"temperatures must be >= 0, got {self.temperatures}")


def temperature_at(config: Config, progress: jax.Array) -> jax.Array:
    """The acting temperature for training progress in [0, 1] (a step schedule)."""
    stage = jnp.sum(progress >= jnp.asarray(config.temperature_milestones, jnp.float32))
    return jnp.asarray(config.temperatures, jnp.float32)[stage]
