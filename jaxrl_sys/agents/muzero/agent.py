"""MuZero with batched MCTS (mctx), for single-player envs and two-player zero-sum self-play.

Same shape as the other agents: `make(env, config)` returns an `Agent` of pure functions.
Every step, one search per env (batched over all envs of the device) picks the action and
gives the policy target; transitions go to a prioritised env-major replay; the learner
unrolls the model K steps from sampled starts against n-step value targets bootstrapped
from a target network, reward targets and the stored (or reanalysed) search policies.

Two-player games (`spec.num_players == 2`) are played by one network for both sides: the
env gives observations and rewards from the view of the player who moves, so the value of
the next state is the opponent's and the search and the n-step targets use discount -gamma.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import optax
from flax import struct

from jaxrl_sys.core import collectives, replay
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval, env_defaults,
)
from jaxrl_sys.core.learner import (
    TargetNetState, device_key, gradient_step, init_target_net_state, learn_after_warmup,
    learning_rate, local_batch_size, priority_beta, replay_updates,
)
from jaxrl_sys.core.networks import ACTIVATIONS, MLP, Head, SameConv
from jaxrl_sys.core.returns import bootstrap_step, n_step_targets
from jaxrl_sys.core.rollout import (
    VecEnvState, episode_metrics, legal_actions, reset_envs, step_envs,
)
from jaxrl_sys.core.types import BoundAgent, Discrete, Env, EnvSpec, Metrics, PyTree
from jaxrl_sys.core.value_transform import Support, h, logits_to_scalar, scalar_to_probs

DEFAULT_ENV = "CartPole-v1"
SEARCHES = ("gumbel", "muzero")
MODELS = ("learned", "env")
TORSOS = ("auto", "mlp", "conv")


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """MuZero hyper-parameters; the defaults solve CartPole-v1."""

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
    num_simulations: int = 16
    max_considered_actions: int = 16  # gumbel only
    # gumbel only: 0 rescales each node's Q-values by their min and max (mctx's default);
    # > 0 divides them by this fixed range instead, which stays well defined with 2 actions
    q_range: float = 0.0
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

    @property
    def steps_per_iteration(self) -> int:
        return self.num_envs

    @property
    def learns_rules(self) -> bool:
        """Whether the learned model has rule heads (the env model knows the rules)."""
        return self.rule_heads and self.model == "learned"

    @property
    def sequence_length(self) -> int:
        """Stored steps read per sample: K unroll steps plus n steps of the last target."""
        return self.unroll_steps + self.n_step

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "updates_per_iteration",
                       "batch_size", "n_step", "unroll_steps", "num_simulations",
                       "max_considered_actions", "target_update_period", "latent_dim",
                       "conv_channels")
        check_budget(self)
        check_at_least(self, 0, "learning_starts", "res_blocks", "opening_plies", "q_range",
                       "weight_decay")
        check_at_least(self, 3, "support_bins")
        if self.buffer_size < self.num_envs * self.sequence_length:
            raise ConfigError(f"buffer_size={self.buffer_size} must hold at least "
                              f"unroll_steps + n_step steps of every env")
        check_positive(self, "learning_rate", "max_grad_norm", "value_max", "reward_max",
                       "dirichlet_alpha", "value_loss_weight", "rule_loss_weight")
        check_unit_interval(self, "gamma", "final_lr_fraction", "dynamics_grad_scale",
                            "dirichlet_fraction", "priority_alpha", "priority_beta_start",
                            "reanalyse_fraction")
        check_choice(self, "search", SEARCHES)
        check_choice(self, "model", MODELS)
        check_choice(self, "torso", TORSOS)
        check_choice(self, "activation", ACTIVATIONS)
        check_layer_widths(self, "hidden")
        if self.model == "env" and self.reanalyse_fraction > 0:
            raise ConfigError("reanalyse_fraction needs model='learned': replay keeps no env "
                              "states to search from")
        if len(self.temperatures) != len(self.temperature_milestones) + 1:
            raise ConfigError("temperatures needs one more entry than temperature_milestones")
        if any(t < 0 for t in self.temperatures):
            raise ConfigError(f"temperatures must be >= 0, got {self.temperatures}")


_ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    # two actions: min-max rescaled Q would always be 0 and 1 (a ~6.6-logit policy target
    # whatever the value gap), which made greedy returns fall back after reaching 475.
    # Two layers of 128 and rule heads (the tree knows where the pole falls): 4 of 4 seeds
    # reached 475 against 3 of 4 with one layer of 64 and no rule heads. Uniform replay
    # (priority_alpha=0): no seed's evaluation fell below 400 after reaching 475 (with 0.5,
    # seeds fell to 323 or lower). gamma 0.995 (value support to 200): the pole may drift
    # out slowly, past a 0.98 horizon; over seeds 0-3 every evaluation of the last 10 chunks
    # was >= 497 (with 0.98 they wobbled 445-500 and one seed ended at 458-471). Learning
    # rate 1e-3 (not 3e-3): with 3e-3 seed 2 reached 500 at 30k steps and fell to 181 two
    # chunks later; with 1e-3 no seed of 0-3 fell below 400 after reaching 475, natively and
    # under AVX2. Tried, with 0.98: 200k steps, a final learning rate of 2%, a peak of 1e-3
    # or 1.5e-3 (finals of 458-472 on some seed, or dips to 185-279 after reaching 475)
    "CartPole-v1": dict(q_range=10.0, hidden=(128, 128), rule_heads=True, priority_alpha=0.0,
                        gamma=0.995, value_max=200.0, learning_rate=1e-3),
    # MinAtar (10x10 images): a small residual conv torso (16 channels, one block), 64 envs,
    # rewards 0/1, rule heads (the tree learns where a life ends); 800k steps train in about
    # 20 minutes on a 2-core CPU (greedy 9.4; 8.0 at 400k)
    "Breakout-MinAtar": dict(
        total_steps=800_000, num_envs=64, gamma=0.99, n_step=10, value_max=30.0,
        reward_max=1.0, learning_rate=1e-3, conv_channels=16, res_blocks=1, hidden=(128,),
        buffer_size=200_000, learning_starts=5_000, num_simulations=16, rule_heads=True,
    ),
    # the model must learn the rules (rewards of winning moves, legal moves, game ends: rule
    # heads): many updates per env step. Four random opening plies show self-play the lines
    # a perfect opponent may choose (without them AlphaZero mode lost 6-14 of 100 games as
    # second player at 60k-120k steps). Q is scaled by its fixed range [-1, 1] (q_range=2):
    # min-max rescaling stretched the tiny Q gaps between drawn moves into full policy targets
    "TicTacToe-v0": dict(
        total_steps=300_000, num_envs=64, updates_per_iteration=8, gamma=1.0, n_step=9,
        value_max=1.0, reward_max=1.0, support_bins=21, num_simulations=32,
        learning_starts=2_000, temperatures=(1.0,), temperature_milestones=(), opening_plies=4,
        rule_heads=True, q_range=2.0,
    ),
}


# any pgx board game: outcomes +-1 at the end, Monte-Carlo value targets (n covers a game of
# connect four; longer games bootstrap from the target network). An MLP on the flattened
# board: the conv torso made connect four's self-play ~10x slower on a CPU.
_BOARD_GAME_DEFAULTS: dict[str, Any] = dict(
    torso="mlp", hidden=(128, 128), rule_heads=True,
    total_steps=1_000_000, num_envs=64, updates_per_iteration=2, gamma=1.0, n_step=42,
    value_max=1.0, reward_max=1.0, support_bins=21, num_simulations=32, learning_starts=5_000,
    buffer_size=200_000, temperatures=(1.0,), temperature_milestones=(),
)


def default_config(env_name: str) -> Config:
    """The MuZero config for `env_name`: shared defaults with that env's overrides applied."""
    if env_name.startswith("pgx:"):
        return dataclasses.replace(Config(), **_BOARD_GAME_DEFAULTS)
    return env_defaults(Config(), _ENV_DEFAULTS, env_name)


# ----------------------------------------------------------------------------- networks


def scale_gradient(x: jax.Array, scale: float) -> jax.Array:
    """Identity forward; multiplies the gradient flowing back through `x` by `scale`."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def normalize_latent(latent: jax.Array) -> jax.Array:
    """Min-max scale each latent vector to [0, 1] (the paper's hidden-state scaling)."""
    low = latent.min(axis=-1, keepdims=True)
    high = latent.max(axis=-1, keepdims=True)
    return (latent - low) / (high - low + 1e-5)


class ResidualBlock(nn.Module):
    """conv-relu-conv plus the input, then relu (3x3 'SAME' convs whose gradients stay fast
    inside the training loop on CPU; parameter names as nn.Conv's)."""

    channels: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.relu(SameConv(self.channels, name="Conv_0")(x))
        return nn.relu(x + SameConv(self.channels, name="Conv_1")(y))


class ConvTorso(nn.Module):
    """A small residual conv net for image observations [B, H, W, C], flattened."""

    channels: int
    blocks: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.relu(SameConv(self.channels, name="Conv_0")(x))
        for _ in range(self.blocks):
            x = ResidualBlock(self.channels)(x)
        return x.reshape(x.shape[0], -1)


RULE_LOGIT_CERTAIN = 30.0  # logit of "legal" / "does not end" when no rule head predicts it


class MuZeroNetwork(nn.Module):
    """Representation h(o) -> s, dynamics g(s, a) -> (s', r, end), prediction
    f(s) -> (pi, v, legal).

    Rewards and values come out as logits over their categorical supports. With
    `rule_heads`, `end` is the logit that the move ends the episode and `legal` the logits
    that each move is legal; without, they are constants (never ends, all legal).
    """

    num_actions: int
    latent_dim: int
    hidden: tuple[int, ...]
    activation: str
    conv: bool
    conv_channels: int
    res_blocks: int
    value_bins: int
    reward_bins: int
    rule_heads: bool = False

    def setup(self) -> None:
        if self.conv:
            self.torso = ConvTorso(self.conv_channels, self.res_blocks)
        else:
            self.torso = MLP(self.hidden, self.activation)
        self.to_latent = Head(self.latent_dim, np.sqrt(2.0))
        self.dynamics_mlp = MLP(self.hidden, self.activation)
        self.next_latent = Head(self.latent_dim, np.sqrt(2.0))
        self.reward_head = Head(self.reward_bins, 0.01)
        self.prediction_mlp = MLP(self.hidden, self.activation)
        self.policy_head = Head(self.num_actions, 0.01)
        self.value_head = Head(self.value_bins, 0.01)
        if self.rule_heads:
            self.end_head = Head(1, 0.01)
            self.legal_head = Head(self.num_actions, 0.01)

    def represent(self, obs: jax.Array) -> jax.Array:
        return normalize_latent(self.to_latent(self.torso(obs)))

    def dynamics(self, latent: jax.Array, action: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
        x = jnp.concatenate([latent, jax.nn.one_hot(action, self.num_actions)], axis=-1)
        x = self.dynamics_mlp(x)
        end_logit = (self.end_head(x)[:, 0] if self.rule_heads
                     else jnp.full(x.shape[:1], -RULE_LOGIT_CERTAIN))
        return normalize_latent(self.next_latent(x)), self.reward_head(x), end_logit

    def predict(self, latent: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        x = self.prediction_mlp(latent)
        policy_logits = self.policy_head(x)
        legal_logits = (self.legal_head(x) if self.rule_heads
                        else jnp.full_like(policy_logits, RULE_LOGIT_CERTAIN))
        return policy_logits, self.value_head(x), legal_logits

    def __call__(self, obs: jax.Array, action: jax.Array):
        """Touches every sub-network (for `init`)."""
        latent = self.represent(obs)
        next_latent, reward, end = self.dynamics(latent, action)
        return self.predict(next_latent), reward, end


# ------------------------------------------------------------------------------- state


State = TargetNetState  # online and target parameters, optimiser state, counters


@struct.dataclass
class EnvState:
    """Per-env state: the envs, their plies into the current episode and their prioritised
    replay rows (leading env axis)."""

    envs: VecEnvState
    ply: jax.Array  # int32 [envs]
    replay: replay.PrioritizedState


@struct.dataclass
class TreeNode:
    """A node of a search that knows where episodes end: the real env's state
    (`model="env"`) or a latent state (learned model with rule heads), and whether an
    episode ended on the way from the root (terminal states are absorbing in the tree)."""

    state: PyTree
    ended: jax.Array  # bool [B]


NO_PRIOR = -1e9  # prior logit of an illegal move inside the tree


@struct.dataclass
class Batch(replay.SequenceBatch):
    """Sampled sequences [B, L, ...] (L = K + n stored steps), validity and IS weights [B],
    with the search's policy and the legal actions at each step [B, L, A]."""

    policy: jax.Array
    legal: jax.Array


class Unroll(NamedTuple):
    """The learned model's logits along sampled sequences: policy [B, K+1, A], value
    [B, K+1, bins], reward [B, K, bins], legal moves [B, K+1, A], episode end [B, K]."""

    policy: jax.Array
    value: jax.Array
    reward: jax.Array
    legal: jax.Array
    end: jax.Array


class SearchOutput(NamedTuple):
    """What one batched search gives: the action, the policy target and the root value."""

    action: jax.Array
    policy: jax.Array
    value: jax.Array


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """MuZero's pure functions bound to one env and config."""

    network: MuZeroNetwork
    search: Callable[..., SearchOutput]
    # the tree's model step (mctx's recurrent_fn): learned, learned with rules, or the env
    recurrent_fn: Callable[..., tuple[mctx.RecurrentFnOutput, Any]]


def supports(config: Config) -> tuple[Support, Support]:
    """(value, reward) supports in h-space covering +-value_max and +-reward_max."""
    with jax.ensure_compile_time_eval():  # numbers, also when `make` runs inside a trace
        value_edge = float(h(jnp.float32(config.value_max)))
        reward_edge = float(h(jnp.float32(config.reward_max)))
    return (Support(-value_edge, value_edge, config.support_bins),
            Support(-reward_edge, reward_edge, config.support_bins))


def build_network(spec: EnvSpec, config: Config) -> MuZeroNetwork:
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"muzero needs discrete actions; {spec.name} has continuous actions")
    conv = config.torso == "conv" or (config.torso == "auto" and len(spec.obs_shape) == 3)
    if conv and len(spec.obs_shape) != 3:
        raise ConfigError(f"torso=conv needs image observations [H, W, C]; {spec.name} "
                          f"has shape {spec.obs_shape}")
    return MuZeroNetwork(
        num_actions=spec.action_space.n, latent_dim=config.latent_dim,
        hidden=tuple(config.hidden), activation=config.activation, conv=conv,
        conv_channels=config.conv_channels, res_blocks=config.res_blocks,
        value_bins=config.support_bins, reward_bins=config.support_bins,
        rule_heads=config.learns_rules,
    )


def build_optimizer(config: Config) -> optax.GradientTransformation:
    lr = learning_rate(config.learning_rate, config.anneal_lr,
                       config.num_iterations * config.updates_per_iteration,
                       config.final_lr_fraction)
    return optax.chain(
        optax.clip_by_global_norm(config.max_grad_norm),
        optax.adamw(lr, weight_decay=config.weight_decay),
    )


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters and optimiser state."""
    network = build_network(spec, config)
    obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
    params = network.init(key, obs, jnp.zeros((1,), jnp.int32))
    return init_target_net_state(params, build_optimizer(config))


def random_legal_actions(key: jax.Array, legal: jax.Array) -> jax.Array:
    """One uniformly random legal action per row of masks [B, A] (any action if none is)."""
    logits = jnp.where(legal.any(-1, keepdims=True) & ~legal, -jnp.inf, 0.0)
    return jax.random.categorical(key, logits).astype(jnp.int32)


def temperature_at(config: Config, progress: jax.Array) -> jax.Array:
    """The acting temperature for training progress in [0, 1] (a step schedule)."""
    stage = jnp.sum(progress >= jnp.asarray(config.temperature_milestones, jnp.float32))
    return jnp.asarray(config.temperatures, jnp.float32)[stage]


# ----------------------------------------------------------------------------- targets


def unroll_masks(
    terminated: jax.Array, truncated: jax.Array, valid: jax.Array, unroll_steps: int
) -> tuple[jax.Array, jax.Array]:
    """Which unroll steps 0..K of sequences [B, L] are real states and which are absorbing.

    alive[:, k]: the state k steps after the start is in the start's episode (and stored).
    absorbing[:, k]: it lies past that episode's termination, where the model must predict
    value and reward 0. Steps past a truncation or the replay's write head are neither and
    get no loss (the real episode went on, or nothing is known). Returns two bool [B, K+1].
    """
    done = terminated | truncated
    alive = [valid[:, 0]]
    absorbing = [jnp.zeros_like(valid[:, 0])]
    for k in range(1, unroll_steps + 1):
        alive.append(alive[k - 1] & ~done[:, k - 1] & valid[:, k])
        absorbing.append(absorbing[k - 1] | (alive[k - 1] & terminated[:, k - 1]))
    return jnp.stack(alive, 1), jnp.stack(absorbing, 1)


def unroll_value_targets(
    reward: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    valid: jax.Array,
    unroll_steps: int,
    n_step: int,
    discount: float,
) -> jax.Array:
    """n-step value targets [B, K+1] for the states 0..K of sequences [B, K + n].

    Target k sums `discount`-discounted rewards k..k+n-1, stopping at the first episode end
    or unwritten step, and bootstraps from `next_values` (the value of the state reached)
    there unless the episode terminated (see `returns.n_step_targets`). A two-player game
    passes discount -gamma. Only meaningful where `unroll_masks` says alive.
    """
    window = lambda x, k: jax.lax.dynamic_slice_in_dim(x, k, n_step, axis=1)  # noqa: E731

    def target_from(k):
        return n_step_targets(
            window(reward, k), window(next_values, k), window(terminated, k),
            window(truncated, k), window(valid, k), discount,
        )

    return jax.vmap(target_from, out_axes=1)(jnp.arange(unroll_steps + 1))


# ------------------------------------------------------------------------------- agent


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind MuZero to `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    optimizer = build_optimizer(config)
    value_support, reward_support = supports(config)
    num_actions = spec.action_space.n
    two_player = getattr(spec, "num_players", 1) == 2
    # the value after a move belongs to the opponent in a two-player zero-sum game
    step_discount = -config.gamma if two_player else config.gamma
    capacity = config.buffer_size // config.num_envs  # per env
    K = config.unroll_steps
    # each unroll step after the first weighs 1/K in the loss
    step_scale = np.concatenate([np.ones(1), np.full(K, 1.0 / K)]).astype(np.float32)

    def represent_predict(params, obs):
        latent = network.apply(params, obs, method=MuZeroNetwork.represent)
        policy_logits, value_logits, _ = network.apply(params, latent,
                                                       method=MuZeroNetwork.predict)
        return latent, policy_logits, value_logits

    def predict_scalar(params, latent):
        """Prior logits, scalar value and legal-move logits of latent states."""
        policy_logits, value_logits, legal_logits = network.apply(
            params, latent, method=MuZeroNetwork.predict)
        return policy_logits, logits_to_scalar(value_logits, value_support), legal_logits

    def absorbing_output(node_ended, ended, reward, policy_logits, value, legal):
        """The tree's view of one step that knows the rules: below a terminal state every
        step gives reward 0, value 0 and discount 0; illegal moves get no prior."""
        return mctx.RecurrentFnOutput(
            reward=jnp.where(node_ended, 0.0, reward),
            discount=jnp.where(ended, 0.0, step_discount),
            prior_logits=jnp.where(legal, policy_logits, NO_PRIOR),
            value=jnp.where(ended, 0.0, value),
        )

    def learned_recurrent_fn(params, key, action, latent):
        """One step of the learned model: dynamics, then prediction."""
        del key
        next_latent, reward_logits, _ = network.apply(
            params, latent, action, method=MuZeroNetwork.dynamics
        )
        policy_logits, value, _ = predict_scalar(params, next_latent)
        output = mctx.RecurrentFnOutput(
            reward=logits_to_scalar(reward_logits, reward_support),
            discount=jnp.full(action.shape, step_discount, jnp.float32),
            prior_logits=policy_logits,
            value=value,
        )
        return output, next_latent

    def ruled_recurrent_fn(params, key, action, node: TreeNode):
        """One step of the learned model with rule heads: moves it predicts to end the
        episode are absorbing and moves it predicts illegal get no prior, as with the env."""
        del key
        next_latent, reward_logits, end_logit = network.apply(
            params, node.state, action, method=MuZeroNetwork.dynamics
        )
        policy_logits, value, legal_logits = predict_scalar(params, next_latent)
        ended = node.ended | (end_logit > 0)
        reward = logits_to_scalar(reward_logits, reward_support)
        output = absorbing_output(node.ended, ended, reward, policy_logits, value,
                                  legal_logits > 0)
        return output, TreeNode(next_latent, ended)

    def env_recurrent_fn(params, key, action, node: TreeNode):
        """One step of the real env (AlphaZero): the network only predicts prior and value.

        Terminal states are absorbing, so the env's auto-reset inside the tree changes
        nothing.
        """
        keys = jax.random.split(key, action.shape[0])
        obs, state, reward, terminated, _, _ = jax.vmap(env.step)(keys, node.state, action)
        ended = node.ended | terminated
        latent = network.apply(params, obs, method=MuZeroNetwork.represent)
        policy_logits, value, _ = predict_scalar(params, latent)
        output = absorbing_output(node.ended, ended, reward, policy_logits, value,
                                  legal_actions(env, state))
        return output, TreeNode(state, ended)

    if config.model == "env":
        recurrent_fn = env_recurrent_fn
    else:
        recurrent_fn = ruled_recurrent_fn if config.learns_rules else learned_recurrent_fn

    gumbel_qtransform = (
        functools.partial(mctx.qtransform_completed_by_mix_value, rescale_values=False,
                          value_scale=0.1 / config.q_range)
        if config.q_range > 0 else mctx.qtransform_completed_by_mix_value
    )

    def search(params, obs, legal, key, temperature=1.0, greedy: bool = False,
               env_state=None) -> SearchOutput:
        """One batched search from observations [B, ...] with legal-action masks [B, A].

        Greedy: no root noise and the most-visited/best action (evaluation). Otherwise the
        gumbel noise scale (gumbel) or visit-count temperature (muzero) is `temperature`.
        The env model (`model="env"`) searches from `env_state`, the envs' states [B, ...].
        """
        latent = network.apply(params, obs, method=MuZeroNetwork.represent)
        policy_logits, value, _ = predict_scalar(params, latent)
        not_ended = jnp.zeros(obs.shape[0], bool)
        if config.model == "env":
            if env_state is None:
                raise ValueError("model='env' searches from env states: pass env_state")
            embedding = TreeNode(env_state, not_ended)
        elif config.learns_rules:
            embedding = TreeNode(latent, not_ended)
        else:
            embedding = latent
        root = mctx.RootFnOutput(prior_logits=policy_logits, value=value, embedding=embedding)
        invalid = ~legal
        if config.search == "gumbel":
            out = mctx.gumbel_muzero_policy(
                params, key, root, recurrent_fn, config.num_simulations,
                invalid_actions=invalid,
                max_num_considered_actions=min(config.max_considered_actions, num_actions),
                gumbel_scale=0.0 if greedy else temperature,
                qtransform=gumbel_qtransform,
            )
        else:
            out = mctx.muzero_policy(
                params, key, root, recurrent_fn, config.num_simulations,
                invalid_actions=invalid,
                dirichlet_fraction=0.0 if greedy else config.dirichlet_fraction,
                dirichlet_alpha=config.dirichlet_alpha,
                temperature=0.0 if greedy else temperature,
            )
        root_value = out.search_tree.node_values[:, mctx.Tree.ROOT_INDEX]
        return SearchOutput(out.action.astype(jnp.int32), out.action_weights, root_value)

    def act(params, obs, key, greedy: bool = False, legal=None, temperature=1.0,
            env_state=None):
        """Actions for a batch of observations by search (all actions legal if no mask)."""
        if legal is None:
            legal = jnp.ones((obs.shape[0], num_actions), bool)
        return search(params, obs, legal, key, temperature, greedy, env_state).action

    def value_targets(target_params, batch: Batch) -> jax.Array:
        """n-step targets [B, K+1] for unroll steps 0..K, bootstrapped by the target network.

        Each target reads one next value (at its window's `bootstrap_step`), so the target
        network runs on those K+1 states per row only, not on all K + n.
        """
        b, length = batch.reward.shape
        window = lambda x, k: jax.lax.dynamic_slice_in_dim(x, k, config.n_step, 1)  # noqa: E731
        stops = jax.vmap(
            lambda k: k + bootstrap_step(window(batch.terminated, k), window(batch.truncated, k),
                                         window(batch.valid, k)),
            out_axes=1,
        )(jnp.arange(K + 1))  # [B, K+1]
        index = stops.reshape(b, K + 1, *([1] * len(spec.obs_shape)))
        boot_obs = jnp.take_along_axis(batch.next_obs, index, axis=1)
        _, _, value_logits = represent_predict(
            target_params, boot_obs.reshape(b * (K + 1), *spec.obs_shape))
        values = logits_to_scalar(value_logits, value_support).reshape(b, K + 1)
        # windows that stop at the same step read the same next state, so one array serves all
        next_values = jnp.zeros((b, length)).at[jnp.arange(b)[:, None], stops].set(values)
        return unroll_value_targets(
            batch.reward, next_values, batch.terminated, batch.truncated, batch.valid,
            K, config.n_step, step_discount,
        )

    def reanalyse(target_params, batch: Batch, key) -> jax.Array:
        """Policy targets [B, L, A]: steps 0..K of every `stride`-th row searched afresh with
        the target parameters (a strided choice splits evenly over devices).

        Runs before the gradient step, outside `jax.grad`: fresh targets are data, as stored
        ones are, and a search with the slowly moving target network is stabler than one
        with the parameters being updated.
        """
        if config.reanalyse_fraction == 0:
            return batch.policy
        stride = max(1, round(1.0 / config.reanalyse_fraction))
        rows = jnp.arange(0, batch.obs.shape[0], stride)
        count = rows.shape[0] * (K + 1)
        obs = batch.obs[rows, : K + 1].reshape(count, *spec.obs_shape)
        legal = batch.legal[rows, : K + 1].reshape(count, num_actions)
        fresh = search(target_params, obs, legal, key, greedy=True).policy
        fresh = fresh.reshape(rows.shape[0], K + 1, num_actions)
        return batch.policy.at[rows, : K + 1].set(fresh)

    def unroll_model(params, batch: Batch) -> Unroll:
        """The model's predictions along each sampled sequence: step 0 from the
        representation of the first observation, steps 1..K from the learned dynamics."""
        latent = network.apply(params, batch.obs[:, 0], method=MuZeroNetwork.represent)
        first = network.apply(params, latent, method=MuZeroNetwork.predict)

        def unroll(latent, action):
            latent, reward_logits, end_logit = network.apply(
                params, latent, action, method=MuZeroNetwork.dynamics
            )
            latent = scale_gradient(latent, config.dynamics_grad_scale)
            later = network.apply(params, latent, method=MuZeroNetwork.predict)
            return latent, (reward_logits, end_logit, later)

        _, (reward_logits, end_logits, later) = jax.lax.scan(
            unroll, latent, batch.action[:, :K].T
        )
        # [B, K+1, .]: step 0 from the representation, steps 1..K from the dynamics
        policy_all, value_all, legal_all = (
            jnp.concatenate([at_0[:, None], at_k.swapaxes(0, 1)], 1)
            for at_0, at_k in zip(first, later)
        )
        return Unroll(policy_all, value_all, reward_logits.swapaxes(0, 1), legal_all,
                      end_logits.swapaxes(0, 1))

    def rules_loss(unrolled: Unroll, batch: Batch, alive: jax.Array) -> jax.Array:
        """Per-row cross-entropy of the rule heads [B]: legal moves at the real states
        0..K (mean over moves) and whether each of the moves 0..K-1 ended the episode."""
        legal_ce = optax.sigmoid_binary_cross_entropy(
            unrolled.legal, batch.legal[:, : K + 1].astype(jnp.float32)).mean(-1)
        end_ce = optax.sigmoid_binary_cross_entropy(
            unrolled.end, batch.terminated[:, :K].astype(jnp.float32))
        return (jnp.sum(legal_ce * alive * step_scale, 1)
                + jnp.sum(end_ce * alive[:, :K] * step_scale[1:], 1))

    def loss_fn(params, target_params, batch: Batch):
        alive, absorbing = unroll_masks(batch.terminated, batch.truncated, batch.valid, K)
        z = jax.lax.stop_gradient(value_targets(target_params, batch))
        z = jnp.where(alive, z, 0.0)
        policy_targets = batch.policy[:, : K + 1]
        policy_mask = alive.astype(jnp.float32)
        reward_targets = jnp.where(alive[:, :K], batch.reward[:, :K], 0.0)
        rule_loss = jnp.zeros(batch.obs.shape[0])
        if config.model == "env":
            # AlphaZero: no model to teach; predict at the stored real positions 0..K
            value_mask = policy_mask
            reward_mask = jnp.zeros_like(value_mask[:, :K])
            rows = batch.obs.shape[0]
            positions = batch.obs[:, : K + 1].reshape(rows * (K + 1), *spec.obs_shape)
            _, policy_all, value_all = represent_predict(params, positions)
            policy_all = policy_all.reshape(rows, K + 1, -1)
            value_all = value_all.reshape(rows, K + 1, -1)
            reward_logits = jnp.zeros((rows, K, config.support_bins))
        else:
            value_mask = (alive | absorbing).astype(jnp.float32)
            reward_mask = value_mask[:, :K]
            unrolled = unroll_model(params, batch)
            policy_all, value_all = unrolled.policy, unrolled.value
            reward_logits = unrolled.reward
            if config.learns_rules:
                rule_loss = rules_loss(unrolled, batch, policy_mask)
        value_ce = optax.softmax_cross_entropy(value_all, scalar_to_probs(z, value_support))
        reward_ce = optax.softmax_cross_entropy(
            reward_logits, scalar_to_probs(reward_targets, reward_support)
        )
        policy_ce = optax.softmax_cross_entropy(policy_all, policy_targets)
        per_row = (
            config.value_loss_weight * jnp.sum(value_ce * value_mask * step_scale, 1)
            + jnp.sum(policy_ce * policy_mask * step_scale, 1)
            + jnp.sum(reward_ce * reward_mask * step_scale[1:], 1)
            + config.rule_loss_weight * rule_loss
        )
        loss = jnp.mean(batch.weights * per_row)
        value_error = jnp.abs(logits_to_scalar(value_all[:, 0], value_support) - z[:, 0])
        aux = {
            "value_loss": jnp.mean(jnp.sum(value_ce * value_mask * step_scale, 1)),
            "policy_loss": jnp.mean(jnp.sum(policy_ce * policy_mask * step_scale, 1)),
            "reward_loss": jnp.mean(jnp.sum(reward_ce * reward_mask * step_scale[1:], 1)),
            "value_target_mean": jnp.mean(z[:, 0]),
        }
        if config.learns_rules:
            aux["rules_loss"] = jnp.mean(rule_loss)
        return loss, (value_error, aux)

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def update(state: State, batch: Batch, key: jax.Array) -> tuple[State, Metrics, jax.Array]:
        """One gradient step on a batch; returns the new state, metrics and new priorities
        (the absolute value error at each row's first step). `key` drives reanalyse."""
        batch = batch.replace(policy=reanalyse(state.target_params, batch, key))
        grads, (value_error, aux) = grad_fn(state.params, state.target_params, batch)
        new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=1.0,
                                  target_update_period=config.target_update_period)
        metrics = {**aux, "loss": sum(aux[k] for k in ("value_loss", "policy_loss",
                                                       "reward_loss", "rules_loss")
                                      if k in aux)}
        return new_state, collectives.pmean(metrics, axis_name), value_error

    def sample(buffer: replay.PrioritizedState, key, batch_size: int, beta) -> tuple[Batch, Any]:
        _, index, weights = replay.sample_prioritized(buffer, key, batch_size, beta,
                                                      axis_name)
        data, valid = replay.gather_sequences(buffer.replay, index, config.sequence_length)
        return Batch.from_rows(data, valid, weights), index

    def collect(state: State, env_state: EnvState, key):
        progress = state.iteration / config.num_iterations
        temperature = temperature_at(config, progress)
        search_key, env_key = jax.random.split(key)
        search_key, opening_key = jax.random.split(device_key(search_key, axis_name))
        vstate = env_state.envs
        legal = legal_actions(env, vstate.env_state)
        out = search(state.params, vstate.obs, legal, search_key, temperature,
                     env_state=vstate.env_state)
        action = out.action
        if config.opening_plies > 0:  # no extra draw in the hot loop when openings are off
            action = jnp.where(env_state.ply < config.opening_plies,
                               random_legal_actions(opening_key, legal), action)
        next_vstate, result = step_envs(env, vstate, action, env_key)
        episode_over = result.terminated | result.truncated
        ply = jnp.where(episode_over, 0, env_state.ply + 1)
        transition = {
            "obs": vstate.obs, "action": action, "reward": result.reward,
            "terminated": result.terminated, "truncated": result.truncated,
            "next_obs": result.info["final_observation"], "policy": out.policy,
            "legal": legal,
        }
        buffer = replay.add_prioritized(env_state.replay, transition)
        episodes = episode_metrics(result.info, axis_name)
        metrics = {**episodes, "temperature": temperature, "search_value": jnp.mean(out.value)}
        metrics["search_value"] = collectives.pmean(metrics["search_value"], axis_name)
        return EnvState(next_vstate, ply, buffer), metrics

    def learn(state: State, buffer, key):
        local_batch = local_batch_size(config.batch_size, axis_name)
        beta = priority_beta(config.priority_beta_start, state.iteration, config.num_iterations)

        def one_update(state, buffer, k):
            sample_key, reanalyse_key = jax.random.split(k)
            batch, index = sample(buffer, device_key(sample_key, axis_name), local_batch, beta)
            state, metrics, value_error = update(state, batch,
                                                 device_key(reanalyse_key, axis_name))
            buffer = replay.update_priorities(buffer, index, value_error, config.priority_alpha)
            return state, buffer, metrics

        return replay_updates(one_update, state, buffer, key, config.updates_per_iteration)

    def train_step(state: State, env_state: EnvState, key):
        """Search and step every env once into replay, then `updates_per_iteration` updates."""
        collect_key, learn_key = jax.random.split(key)
        env_state, collect_metrics = collect(state, env_state, collect_key)
        ready = (state.iteration + 1) * config.steps_per_iteration >= config.learning_starts
        state, buffer, metrics = learn_after_warmup(ready, learn, state, env_state.replay,
                                                    learn_key)
        return state, env_state.replace(replay=buffer), {**metrics, **collect_metrics}

    def init_envs(key, env_ids) -> EnvState:
        vstate = reset_envs(env, key, env_ids)
        obs = jnp.zeros(spec.obs_shape, jnp.float32)
        example = {
            "obs": obs, "action": jnp.zeros((), jnp.int32), "reward": jnp.zeros((), jnp.float32),
            "terminated": jnp.zeros((), bool), "truncated": jnp.zeros((), bool),
            "next_obs": obs, "policy": jnp.zeros((num_actions,), jnp.float32),
            "legal": jnp.zeros((num_actions,), bool),
        }
        ply = jnp.zeros(env_ids.shape[0], jnp.int32)
        return EnvState(vstate, ply, replay.init_prioritized(example, env_ids.shape[0], capacity))

    return Agent(config, spec, lambda key: init(key, spec, config), init_envs, act, update,
                 train_step, network=network, search=search, recurrent_fn=recurrent_fn)


def greedy_action(agent: Agent) -> Callable[..., jax.Array]:
    """Greedy search actions for evaluation (the env model searches from `env_state`)."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs, key, greedy=True, legal=legal, env_state=env_state
    )


DEFAULT_EVAL_EPISODES = 32  # training acts with exploration noise; report the greedy policy

