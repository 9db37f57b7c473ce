"""DQN with double Q-learning, n-step returns, target network, optional dueling head and
prioritised replay, on vectorised envs with an on-device replay buffer.

Same shape as agents/ppo.py: `make(env, config)` returns an `Agent` of pure functions. The
replay buffer is env-major and lives in the per-env state, so under the execution layer each
device keeps the transitions of its own envs; each device samples its share of the global
batch and gradients are averaged with `lax.pmean`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from jaxrl_sys.core import collectives, obs_norm, replay
from jaxrl_sys.core.config import (
    ConfigError, RolloutBudget, check_at_least, check_budget, check_choice, check_layer_widths,
    check_positive, check_unit_interval, env_defaults,
)
from jaxrl_sys.core.learner import (
    TargetNetState, device_key, gradient_step, init_target_net_state, learn_after_warmup,
    learning_rate, local_batch_size, priority_beta, replay_updates,
)
from jaxrl_sys.core.networks import (
    ACTIVATIONS, TORSOS, Head, check_torso_fits, make_torso, scan_unroll,
)
from jaxrl_sys.core.returns import bootstrap_step, n_step_targets
from jaxrl_sys.core.rollout import VecEnvState, episode_metrics, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import BoundAgent, Discrete, Env, EnvSpec, HostFns, Metrics, Rollout

DEFAULT_ENV = "CartPole-v1"


@dataclasses.dataclass(frozen=True)
class Config(RolloutBudget):
    """DQN hyper-parameters; the defaults solve CartPole-v1 (16 of 16 seeds at 500, greedy).

    Short n-step returns need the Huber loss to be close to squared error (returns run to the
    hundreds; with delta 1 the gradient is sign-only) and more, smoothed target updates: the
    defaults take 4 gradient steps per 32 env steps and a Polyak target.
    """

    total_steps: int = 200_000
    num_envs: int = 32
    rollout_steps: int = 1  # vectorised env steps per iteration
    updates_per_iteration: int = 4  # gradient steps per iteration
    buffer_size: int = 50_000  # transitions per seed, over all envs
    batch_size: int = 256  # global, split over devices
    learning_starts: int = 1_000  # env steps per seed before learning
    learning_rate: float = 1e-3
    anneal_lr: bool = True
    final_lr_fraction: float = 0.0  # learning rate at the end / learning_rate (0: freezes)
    max_grad_norm: float = 10.0
    gamma: float = 0.99
    n_step: int = 3
    double_q: bool = True
    # advantage learning (Bellemare et al. 2016): the target is lowered by this times the
    # taken action's gap to the best under the target network, which widens small gaps
    # between actions; 0 is plain DQN
    advantage_learning: float = 0.0
    dueling: bool = False
    huber_delta: float = 10.0
    target_update_period: int = 1  # gradient steps between target updates
    tau: float = 0.01  # 1.0: copy; < 1: Polyak averaging at every target update
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    exploration_fraction: float = 0.25  # of total_steps
    prioritized: bool = False
    priority_alpha: float = 0.6
    priority_beta_start: float = 0.4  # annealed to 1 over training
    hidden: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    torso: str = "mlp"  # or "nature_cnn" (stacked frames, e.g. Atari), "grid_cnn" (MinAtar)
    normalize_obs: bool = False

    def validate(self) -> None:
        """Reject values that cannot work, with one line naming the field."""
        check_at_least(self, 1, "total_steps", "num_envs", "rollout_steps",
                       "updates_per_iteration", "batch_size", "n_step", "target_update_period")
        check_budget(self)
        if self.buffer_size < self.num_envs * self.n_step:
            raise ConfigError(
                f"buffer_size={self.buffer_size} must hold at least n_step steps of every env"
            )
        check_at_least(self, 0, "learning_starts")
        check_positive(self, "learning_rate", "max_grad_norm", "huber_delta", "tau")
        check_unit_interval(self, "gamma", "tau", "final_lr_fraction", "epsilon_start",
                            "epsilon_end", "exploration_fraction", "priority_alpha",
                            "priority_beta_start", "advantage_learning")
        check_choice(self, "activation", ACTIVATIONS)
        check_choice(self, "torso", TORSOS)
        check_layer_widths(self, "hidden")


# MinAtar-paper-like DQN (replay 100k, lr 2.5e-4, epsilon to 0.05 over the first 10%), one
# update of 64 per 4 env steps, 3-step returns, two layers of 256 on the flattened frame.
# 4 seeds at 1M steps, greedy: Breakout 63.7 (PPO's 10M reference: 28), SpaceInvaders 108.8
# (131); Asterix stayed at 1.2 and Freeway fell to 3.4 with them (README, "Results")
_MINATAR: dict[str, Any] = dict(
    total_steps=1_000_000, num_envs=32, rollout_steps=1, updates_per_iteration=8,
    batch_size=64, buffer_size=100_000, learning_starts=5_000, learning_rate=2.5e-4,
    anneal_lr=False, gamma=0.99, n_step=3, target_update_period=500, tau=1.0, huber_delta=1.0,
    exploration_fraction=0.1, epsilon_end=0.05, hidden=(256, 256),
)

# Dopamine's MinAtar DQN: the MinAtar paper's conv torso (`grid_cnn`, one 3x3 conv of 16, then
# 128 units), 1-step targets, batch 32, a target copy every 250 updates (1000 env steps),
# epsilon to 0.01; the games where the family's settings above fail
_MINATAR_DOPAMINE: dict[str, Any] = {
    **_MINATAR, "torso": "grid_cnn", "hidden": (128,), "n_step": 1, "batch_size": 32,
    "target_update_period": 250, "epsilon_end": 0.01,
}

_ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {},
    # rl-baselines3-zoo's DQN Acrobot settings (one update of 128 per env step, hard target
    # copy every 250 updates, 1-step targets): greedy -72.7 over 4 seeds at 100k steps
    "Acrobot-v1": dict(
        total_steps=100_000, num_envs=8, rollout_steps=1, updates_per_iteration=8,
        batch_size=128, buffer_size=50_000, learning_starts=1_000, learning_rate=6.3e-4,
        anneal_lr=False, gamma=0.99, n_step=1, target_update_period=250, tau=1.0,
        huber_delta=1.0, exploration_fraction=0.12, epsilon_end=0.1, hidden=(256, 256),
    ),
    # host loop: one worker process per env; the same updates per env step as on device
    "gymnasium:CartPole-v1": dict(num_envs=8, rollout_steps=16, updates_per_iteration=16),
    # MinAtar-paper-like DQN (see _MINATAR) for every MinAtar game
    "*-MinAtar": _MINATAR,
    # Freeway: Dopamine's MinAtar DQN (above) with advantage learning. The action gap at the
    # bottom row is about 1% of the value, so plain DQN's greedy chicken sometimes presses
    # "down" there forever (greedy 44.2 over 4 seeds at 1M: three at 58-59, one at 1.3);
    # widening the gap (Bellemare et al. 2016) screened at 61.0, every seed at 60-61
    "Freeway-MinAtar": {**_MINATAR_DOPAMINE, "advantage_learning": 0.9},
    # Asterix: Dopamine's MinAtar DQN: 21.5 over 4 seeds at 1M steps (PPO's 10M reference:
    # 15); the family's settings stayed at 1.2
    "Asterix-MinAtar": _MINATAR_DOPAMINE,
}


def default_config(env_name: str) -> Config:
    """The DQN config for `env_name`: shared defaults with that env's overrides applied."""
    return env_defaults(Config(), _ENV_DEFAULTS, env_name)


class QNetwork(nn.Module):
    """Q-network (an MLP or conv torso, see `networks.TORSOS`), optionally with a dueling
    (value + advantage) head."""

    num_actions: int
    hidden: tuple[int, ...]
    activation: str
    dueling: bool
    torso: str = "mlp"

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = make_torso(self.torso, self.hidden, self.activation)(obs)
        if not self.dueling:
            return Head(self.num_actions)(x)
        value = Head(1)(x)
        advantage = Head(self.num_actions)(x)
        return value + advantage - advantage.mean(axis=-1, keepdims=True)


State = TargetNetState  # online and target parameters, optimiser state, counters


@struct.dataclass
class EnvState:
    """Per-env state: the envs and their replay rows (every leaf has a leading env axis)."""

    envs: VecEnvState
    replay: Any  # replay.ReplayState or replay.PrioritizedState


Batch = replay.SequenceBatch  # sampled n-step sequences [B, n, ...], importance weights [B]


@dataclasses.dataclass(frozen=True)
class Agent(BoundAgent):
    """DQN's pure functions bound to one env and config."""

    network: QNetwork
    absorb: Callable[[State, Any, jax.Array], tuple[State, Any, Metrics]]
    init_replay: Callable[[int], Any]


def build_network(spec: EnvSpec, config: Config) -> QNetwork:
    if not isinstance(spec.action_space, Discrete):
        raise ConfigError(f"dqn needs discrete actions; {spec.name} has continuous actions")
    check_torso_fits(config.torso, spec.obs_shape, spec.name)
    return QNetwork(spec.action_space.n, tuple(config.hidden), config.activation, config.dueling,
                    config.torso)


def build_optimizer(config: Config) -> optax.GradientTransformation:
    lr = learning_rate(config.learning_rate, config.anneal_lr,
                       config.num_iterations * config.updates_per_iteration,
                       config.final_lr_fraction)
    return optax.chain(optax.clip_by_global_norm(config.max_grad_norm), optax.adam(lr))


def init(key: jax.Array, spec: EnvSpec, config: Config) -> State:
    """Fresh online/target parameters and optimiser state."""
    params = build_network(spec, config).init(key, jnp.zeros((1, *spec.obs_shape), jnp.float32))
    return init_target_net_state(params, build_optimizer(config)).replace(
        obs_stats=obs_norm.init_stats(config.normalize_obs, spec.obs_shape)
    )


def epsilon_at(config: Config, env_steps: jax.Array) -> jax.Array:
    """Linear exploration schedule over `exploration_fraction` of the run."""
    horizon = max(1.0, config.exploration_fraction * config.total_steps)
    frac = jnp.clip(env_steps / horizon, 0.0, 1.0)
    return config.epsilon_start + frac * (config.epsilon_end - config.epsilon_start)


def make(env: Env, config: Config, axis_name: Optional[str] = "device") -> Agent:
    """Bind DQN to `env` and `config`; gradients average over `axis_name`."""
    config.validate()
    spec = env.spec
    network = build_network(spec, config)
    optimizer = build_optimizer(config)
    num_actions = spec.action_space.n
    capacity = config.buffer_size // config.num_envs  # per env

    def act(params, obs, key, greedy: bool = False, epsilon: jax.Array | float = 0.0):
        """Greedy or epsilon-greedy actions for a batch; per-row keys [B] or one key."""
        greedy_actions = jnp.argmax(network.apply(params, obs), axis=-1)
        if greedy:
            return greedy_actions
        keys = key if key.ndim == 2 else jax.random.split(key, obs.shape[0])
        explore = jax.vmap(lambda k: jax.random.uniform(k) < epsilon)(keys)
        random_actions = jax.vmap(lambda k: jax.random.randint(k, (), 0, num_actions))(
            jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)
        )
        return jnp.where(explore, random_actions, greedy_actions)

    def loss_fn(params, target_params, batch: Batch):
        # n_step_targets bootstraps each sequence only at its first stop (episode end or last
        # valid step), so evaluate the networks on that one next state per row (not all n)
        stop = bootstrap_step(batch.terminated, batch.truncated, batch.valid)
        boot_obs = jnp.take_along_axis(
            batch.next_obs, stop.reshape(-1, 1, *([1] * len(spec.obs_shape))), axis=1
        )[:, 0]
        next_q_target = network.apply(target_params, boot_obs)
        if config.double_q:
            next_actions = jnp.argmax(network.apply(params, boot_obs), axis=-1)
        else:
            next_actions = jnp.argmax(next_q_target, axis=-1)
        next_values = jnp.take_along_axis(next_q_target, next_actions[:, None], axis=-1)[:, 0]
        next_values = jax.lax.stop_gradient(
            jnp.broadcast_to(next_values[:, None], batch.reward.shape)
        )
        targets = n_step_targets(
            batch.reward, next_values, batch.terminated, batch.truncated, batch.valid,
            config.gamma,
        )
        taken = batch.action[:, 0, None].astype(jnp.int32)
        if config.advantage_learning:
            q_target_now = jax.lax.stop_gradient(network.apply(target_params, batch.obs[:, 0]))
            q_target_taken = jnp.take_along_axis(q_target_now, taken, axis=-1)[:, 0]
            gap = jnp.max(q_target_now, axis=-1) - q_target_taken
            targets = targets - config.advantage_learning * gap
        q = network.apply(params, batch.obs[:, 0])
        q_taken = jnp.take_along_axis(q, taken, axis=-1)[:, 0]
        td_error = q_taken - targets
        loss = jnp.mean(batch.weights * optax.huber_loss(td_error, delta=config.huber_delta))
        return loss, (td_error, jnp.mean(q_taken))

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def update(state: State, batch: Batch) -> tuple[State, Metrics, jax.Array]:
        """One gradient step on a batch of stored (raw) steps, normalised with the state's
        observation statistics; returns the new state, metrics and TD errors."""
        batch = batch.replace(obs=obs_norm.normalize(state.obs_stats, batch.obs),
                              next_obs=obs_norm.normalize(state.obs_stats, batch.next_obs))
        grads, (td_error, q_mean) = grad_fn(state.params, state.target_params, batch)
        new_state = gradient_step(state, grads, optimizer, axis_name=axis_name, tau=config.tau,
                                  target_update_period=config.target_update_period)
        loss = jnp.mean(optax.huber_loss(td_error, delta=config.huber_delta))
        metrics = collectives.pmean({"loss": loss, "q_mean": q_mean}, axis_name)
        return new_state, metrics, td_error

    def sample(buffer, key, batch_size: int, beta: jax.Array) -> tuple[Batch, Any]:
        if config.prioritized:
            _, index, weights = replay.sample_prioritized(buffer, key, batch_size, beta,
                                                          axis_name)
            data, valid = replay.gather_sequences(buffer.replay, index, config.n_step)
        else:
            data, valid, index = replay.sample_sequences(buffer, key, batch_size, config.n_step)
            weights = jnp.ones(batch_size, jnp.float32)
        return Batch.from_rows(data, valid, weights), index

    def collect(state: State, env_state: EnvState, key):
        env_steps = state.iteration * config.steps_per_iteration
        epsilon = epsilon_at(config, env_steps)

        def one_step(carry, t):
            vstate, buffer = carry
            act_key, env_key = jax.random.split(jax.random.fold_in(key, t))
            actions = act(state.params, obs_norm.normalize(state.obs_stats, vstate.obs),
                          per_env_keys(act_key, vstate.env_ids), epsilon=epsilon)
            next_vstate, result = step_envs(env, vstate, actions, env_key)
            transition = {
                "obs": vstate.obs, "action": actions.astype(jnp.int32),
                "reward": result.reward, "terminated": result.terminated,
                "truncated": result.truncated, "next_obs": result.info["final_observation"],
            }
            add = replay.add_prioritized if config.prioritized else replay.add
            seen = None if state.obs_stats is None else vstate.obs  # no stacking when unused
            return (next_vstate, add(buffer, transition)), (episode_metrics(result.info, None),
                                                            seen)

        (vstate, buffer), (episodes, seen) = jax.lax.scan(
            one_step, (env_state.envs, env_state.replay), jnp.arange(config.rollout_steps)
        )
        episodes = jax.tree.map(jnp.sum, episodes)
        episodes = collectives.psum(episodes, axis_name)
        state = state.replace(obs_stats=obs_norm.update(state.obs_stats, seen, axis_name))
        return state, EnvState(vstate, buffer), episodes, epsilon

    def learn(state: State, buffer, key):
        local_batch = local_batch_size(config.batch_size, axis_name)
        beta = priority_beta(config.priority_beta_start, state.iteration, config.num_iterations)

        def one_update(state, buffer, k):
            batch, index = sample(buffer, device_key(k, axis_name), local_batch, beta)
            state, metrics, td_error = update(state, batch)
            if config.prioritized:
                buffer = replay.update_priorities(
                    buffer, index, jnp.abs(td_error), config.priority_alpha
                )
            return state, buffer, metrics

        return replay_updates(one_update, state, buffer, key, config.updates_per_iteration,
                              unroll=scan_unroll(config.torso, config.updates_per_iteration))

    def absorb(state: State, buffer, key):
        """The learning half of an iteration, after its transitions are in `buffer`: learn
        (once the warm-up is over) and count the iteration. Shared with the host loop."""
        ready = (state.iteration + 1) * config.steps_per_iteration >= max(
            config.learning_starts, config.n_step * config.num_envs
        )
        return learn_after_warmup(ready, learn, state, buffer, key)

    def train_step(state: State, env_state: EnvState, key):
        """Step every env `rollout_steps` times into replay, then `updates_per_iteration` updates."""
        collect_key, learn_key = jax.random.split(key)
        state = state.replace(
            obs_stats=obs_norm.update_if_empty(state.obs_stats, env_state.envs.obs, axis_name)
        )
        state, env_state, episodes, epsilon = collect(state, env_state, collect_key)
        state, buffer, metrics = absorb(state, env_state.replay, learn_key)
        return state, EnvState(env_state.envs, buffer), {**metrics, "epsilon": epsilon, **episodes}

    def init_replay(num_envs: int):
        """Empty replay rows for `num_envs` envs (env-major, `capacity` steps each)."""
        obs = jnp.zeros(spec.obs_shape, spec.obs_dtype)  # uint8 frames stay uint8 in replay
        example = {
            "obs": obs, "action": jnp.zeros((), jnp.int32),
            "reward": jnp.zeros((), jnp.float32), "terminated": jnp.zeros((), bool),
            "truncated": jnp.zeros((), bool), "next_obs": obs,
        }
        make_buffer = replay.init_prioritized if config.prioritized else replay.init
        return make_buffer(example, num_envs, capacity)

    def init_envs(key, env_ids) -> EnvState:
        return EnvState(reset_envs(env, key, env_ids), init_replay(env_ids.shape[0]))

    return Agent(config, spec, lambda key: init(key, spec, config), init_envs, act, update,
                 train_step, network=network, absorb=absorb, init_replay=init_replay)


def greedy_action(agent: Agent) -> Callable[[State, jax.Array, jax.Array], jax.Array]:
    """Greedy (argmax Q) actions for evaluation (from the observation alone)."""
    return lambda state, obs, key, legal=None, env_state=None: agent.act(
        state.params, obs_norm.normalize(state.obs_stats, obs), key, greedy=True
    )


DEFAULT_EVAL_EPISODES = 32  # training returns are epsilon-greedy; report the greedy policy



def host_fns(agent: Agent) -> HostFns:
    """DQN for the host loop: epsilon-greedy `act`; rollouts go into replay, then `absorb`."""
    config = agent.config
    add = replay.add_prioritized if config.prioritized else replay.add

    def act(actor, obs, key, env_steps):
        params, obs_stats = actor
        return agent.act(params, obs_norm.normalize(obs_stats, obs), key,
                         epsilon=epsilon_at(config, env_steps)), {}

    def learn(state: State, buffer, rollout: Rollout, key):
        transitions = {
            "obs": rollout.obs, "action": rollout.action.astype(jnp.int32),
            "reward": rollout.reward, "terminated": rollout.terminated,
            "truncated": rollout.truncated, "next_obs": rollout.next_obs,
        }
        buffer, _ = jax.lax.scan(lambda b, step: (add(b, step), None), buffer, transitions)
        state = state.replace(obs_stats=obs_norm.update(state.obs_stats, rollout.obs, None))
        epsilon = epsilon_at(config, state.iteration * config.steps_per_iteration)
        state, buffer, metrics = agent.absorb(state, buffer, key)
        return state, buffer, {**metrics, "epsilon": epsilon}

    return HostFns(
        init=lambda key: (agent.init(key), agent.init_replay(config.num_envs)),
        actor_params=lambda state: (state.params, state.obs_stats),
        act=act,
        learn=learn,
        num_envs=config.num_envs,
        rollout_steps=config.rollout_steps,
    )
