"""POPGym memory tasks as pure-JAX gymnax 1.x envs: RepeatFirst, RepeatPrevious, CountRecall and
StatelessCartPole, each at the Easy/Medium/Hard levels (registered as `<Task><Level>-popgym`).

These are partially observable tasks that only an agent with memory solves: repeat the suit of
the first card dealt, or of the card dealt k steps ago; say how often the queried card type has
been dealt so far; balance a cart-pole seeing only the cart position and the pole angle.

Ported from popjym (github.com/FLAIROx/popjym, FLAIROx, Apache License 2.0 per its LICENSE
file; a copy: LICENSES/popjym-Apache-2.0.txt), which is Chris Lu's popjaxrl
(github.com/luchris429/popjaxrl) cleaned up; the tasks are from Morad et al. 2023, "POPGym:
Benchmarking Partially Observable Reinforcement Learning" (ICLR). Observations, rewards, episode lengths, levels and random draws (same key, same episode)
are popjym's.
Why ported, not depended on: popjym is not on PyPI, and POPGym Arcade (`popgym-arcade`) needs
`stable-gymnax`, which installs a module named `gymnax` over gymnax, and renders 128x128 pixels.

Differences from popjym, none of which changes an episode:
- CountRecall's action space is Discrete(max count + 1), not popjym's Discrete(2), which cannot
  say a count above 1 (popjaxrl issue #10); the rewarded answer is the same.
- `max_steps_in_episode` (gymnax's time limit, the spec's `max_episode_steps`) defaults to the
  episode length, at which popjym's episodes terminate; set lower, it truncates them. For
  StatelessCartPole it is popjym's constructor argument and sets the episode length itself.
- The step counter is `time` (gymnax's name), and the terminal observation's card index is
  clamped explicitly where popjym relies on JAX's clamped out-of-bounds gather.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces

from jaxrl_sys.envs import gymnax_env

DECK_SIZE = 52
NUM_SUITS = 4

StepOut = tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, Any]]


@struct.dataclass
class EnvParams(environment.EnvParams):
    """gymnax's params: only `max_steps_in_episode`, which defaults to the episode length."""


@struct.dataclass
class CardState:
    """A dealt deck (RepeatFirst, RepeatPrevious): the step and every card's suit in deal order."""

    time: jax.Array  # int32: steps taken; the card shown now is cards[time]
    cards: jax.Array  # int32 [num_cards]: suit of each card, in the order dealt


@struct.dataclass
class CountState:
    """CountRecall's two decks and how often each card type has been dealt before `time`."""

    time: jax.Array  # int32: steps taken; the cards shown now are value/query_cards[time]
    value_cards: jax.Array  # int32 [num_cards]: the dealt card's type, in order
    query_cards: jax.Array  # int32 [num_cards]: the queried type, in order
    counts: jax.Array  # int32 [num_types]: value cards of each type dealt before `time`


@struct.dataclass
class CartPoleState:
    """The full cart-pole state; the agent sees only x and theta."""

    x: jax.Array
    x_dot: jax.Array
    theta: jax.Array
    theta_dot: jax.Array
    time: jax.Array


@struct.dataclass
class CartPoleParams:
    """popjym's cart-pole physics (gymnax CartPole-v1's) and gymnax's time limit."""

    gravity: float = 9.8
    masscart: float = 1.0
    masspole: float = 0.1
    total_mass: float = 1.0 + 0.1  # (masscart + masspole)
    length: float = 0.5
    polemass_length: float = 0.05  # (masspole * length)
    force_mag: float = 10.0
    tau: float = 0.02
    theta_threshold_radians: float = 12 * 2 * jnp.pi / 360
    x_threshold: float = 2.4
    max_steps_in_episode: int = 200


def _at_least(name: str, value: int, low: int) -> None:
    """Refuse a level knob below `low` (ValueError, which `gymnax_env.build` makes one line)."""
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def _dealt(key: jax.Array, num_cards: int, num_kinds: int) -> jax.Array:
    """A shuffled deck of `num_cards` cards of `num_kinds` kinds (int32 [num_cards]), as popjym."""
    return jax.random.permutation(key, jnp.arange(num_cards, dtype=jnp.int32) % num_kinds)


class _PopGymEnv(environment.Environment):
    """Shared by the tasks: the time limit defaults to the episode length, which terminates."""

    @property
    def episode_length(self) -> int:
        """Steps in an episode that runs to its end (popjym's termination step)."""
        raise NotImplementedError

    @property
    def default_params(self) -> EnvParams:
        """gymnax's time limit at the episode length, so the spec reports that length."""
        return EnvParams(max_steps_in_episode=self.episode_length)

    def is_terminated(self, state: Any, params: Any) -> jax.Array:
        """The episode's natural end (popjym's `terminated`)."""
        return state.time >= self.episode_length

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        """gymnax's time limit, only where it falls before the natural end (set below it)."""
        return jnp.logical_and(state.time >= params.max_steps_in_episode,
                               jnp.logical_not(self.is_terminated(state, params)))


class _CardEnv(_PopGymEnv):
    """A deck of `num_decks` x 52 cards dealt one per step; the agent sees the suit, one-hot."""

    def __init__(self, num_decks: int = 1) -> None:
        super().__init__()
        _at_least("num_decks", num_decks, 1)
        self.num_decks = num_decks
        self.num_cards = DECK_SIZE * num_decks

    @property
    def episode_length(self) -> int:
        """One step per card."""
        return self.num_cards

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, CardState]:
        """Shuffle the deck and show its first card."""
        state = CardState(time=jnp.int32(0), cards=_dealt(key, self.num_cards, NUM_SUITS))
        return self.get_obs(state), state

    def get_obs(self, state: CardState, params: Any = None, key: Any = None) -> jax.Array:
        """The suit of the card at `time`, one-hot float32 [4]."""
        return jax.nn.one_hot(state.cards[self._shown(state.time)], NUM_SUITS, dtype=jnp.float32)

    def _shown(self, time: jax.Array) -> jax.Array:
        """The index of the card shown at `time` (past the end: see the subclasses)."""
        raise NotImplementedError

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """Name a suit."""
        return spaces.Discrete(NUM_SUITS)

    def observation_space(self, params: Any) -> spaces.Box:
        """A one-hot suit."""
        return spaces.Box(0.0, 1.0, (NUM_SUITS,), jnp.float32)


class RepeatFirst(_CardEnv):
    """Each step, name the suit of the episode's first card: +-1/(n-1) per step for n cards.

    All n steps score (popjym's), so a perfect episode returns n/(n-1) (52/51 at Easy).
    """

    def step_env(self, key: jax.Array, state: CardState, action: jax.Array,
                 params: EnvParams) -> StepOut:
        """Score the action against the first card and deal the next."""
        scale = 1.0 / (self.num_cards - 1.0)
        reward = jnp.where(state.cards[0] == action, scale, -scale)
        state = state.replace(time=state.time + 1)
        return self.get_obs(state), state, reward, self.is_terminated(state, params), {}

    def _shown(self, time: jax.Array) -> jax.Array:
        """popjym's `time % n`: the last observation shows the first card again."""
        return time % self.num_cards


class RepeatPrevious(_CardEnv):
    """Each step from the k-th on, name the suit of the card shown k steps ago: +-1/(n-k).

    The first k steps score 0, so a perfect episode of n cards returns exactly 1.
    """

    def __init__(self, num_decks: int = 1, k: int = 4) -> None:
        super().__init__(num_decks)
        _at_least("k", k, 1)
        if k >= self.num_cards:
            raise ValueError(f"k must be below the {self.num_cards} cards dealt, got {k}")
        self.k = k

    def step_env(self, key: jax.Array, state: CardState, action: jax.Array,
                 params: EnvParams) -> StepOut:
        """Score the action against the card k steps back (0 before k) and deal the next."""
        scale = 1.0 / (self.num_cards - self.k)
        target = state.cards[jnp.maximum(state.time - self.k, 0)]
        reward = jnp.where(state.time < self.k, 0.0, jnp.where(target == action, scale, -scale))
        state = state.replace(time=state.time + 1)
        return self.get_obs(state), state, reward, self.is_terminated(state, params), {}

    def _shown(self, time: jax.Array) -> jax.Array:
        """The last observation repeats the last card (popjym's clamped gather)."""
        return jnp.minimum(time, self.num_cards - 1)


class CountRecall(_PopGymEnv):
    """Each step a value card and a query card are dealt; answer how many value cards of the
    queried type were dealt before this step: +-1/n per step, a perfect episode returns 1.

    Observation float32 [2 * num_types]: the value card's type one-hot, then the query's.
    """

    def __init__(self, num_decks: int = 1, num_types: int = 2) -> None:
        super().__init__()
        _at_least("num_decks", num_decks, 1)
        _at_least("num_types", num_types, 1)
        self.num_decks = num_decks
        self.num_types = num_types
        self.num_cards = DECK_SIZE * num_decks
        # The largest count a query can ask about: the most cards any one type has.
        self.max_count = -(-self.num_cards // num_types)

    @property
    def episode_length(self) -> int:
        """One step per card."""
        return self.num_cards

    def step_env(self, key: jax.Array, state: CountState, action: jax.Array,
                 params: EnvParams) -> StepOut:
        """Score the answer against the queried type's count so far, then count the value card."""
        scale = 1.0 / self.num_cards
        answer = state.counts[state.query_cards[state.time]]
        reward = jnp.where(action == answer, scale, -scale)
        counts = state.counts.at[state.value_cards[state.time]].add(1)
        state = state.replace(time=state.time + 1, counts=counts)
        return self.get_obs(state), state, reward, self.is_terminated(state, params), {}

    def reset_env(self, key: jax.Array, params: EnvParams) -> tuple[jax.Array, CountState]:
        """Shuffle both decks (popjym's key split) and show their first cards."""
        _, key_value, key_query = jax.random.split(key, 3)
        state = CountState(time=jnp.int32(0),
                           value_cards=_dealt(key_value, self.num_cards, self.num_types),
                           query_cards=_dealt(key_query, self.num_cards, self.num_types),
                           counts=jnp.zeros((self.num_types,), jnp.int32))
        return self.get_obs(state), state

    def get_obs(self, state: CountState, params: Any = None, key: Any = None) -> jax.Array:
        """[value type one-hot, query type one-hot] at `time` (past the end: the last cards)."""
        t = jnp.minimum(state.time, self.num_cards - 1)
        return jnp.concatenate([jax.nn.one_hot(state.value_cards[t], self.num_types),
                                jax.nn.one_hot(state.query_cards[t], self.num_types)])

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """Answer a count 0..max_count (popjym's Discrete(2) cannot answer above 1)."""
        return spaces.Discrete(self.max_count + 1)

    def observation_space(self, params: Any) -> spaces.Box:
        """Two one-hot card types."""
        return spaces.Box(0.0, 1.0, (2 * self.num_types,), jnp.float32)


class StatelessCartPole(_PopGymEnv):
    """CartPole-v1 seeing only [x, theta] (no velocities), popjym's NoisyStatelessCartPole.

    +1/max_steps_in_episode per step, so a full episode returns 1; reaching
    `max_steps_in_episode` terminates (as in popjym), as does the pole or cart leaving its
    bounds. `noise_sigma` adds Gaussian noise to the observation (popjym's Noisy levels).
    """

    def __init__(self, max_steps_in_episode: int = 200, noise_sigma: float = 0.0) -> None:
        super().__init__()
        _at_least("max_steps_in_episode", max_steps_in_episode, 1)
        if not noise_sigma >= 0.0:
            raise ValueError(f"noise_sigma must be >= 0, got {noise_sigma}")
        self.max_steps_in_episode = max_steps_in_episode
        self.noise_sigma = noise_sigma

    @property
    def episode_length(self) -> int:
        """The step at which a balanced episode terminates."""
        return self.max_steps_in_episode

    @property
    def default_params(self) -> CartPoleParams:
        """popjym's physics with gymnax's time limit at the episode length."""
        return CartPoleParams(max_steps_in_episode=self.max_steps_in_episode)

    def step_env(self, key: jax.Array, state: CartPoleState, action: jax.Array,
                 params: CartPoleParams) -> StepOut:
        """One Euler step of the cart-pole (popjym's, i.e. gymnax CartPole-v1's dynamics)."""
        prev_terminal = self.is_terminated(state, params)
        force = params.force_mag * action - params.force_mag * (1 - action)
        costheta, sintheta = jnp.cos(state.theta), jnp.sin(state.theta)
        temp = (force + params.polemass_length * state.theta_dot**2 * sintheta
                ) / params.total_mass
        thetaacc = (params.gravity * sintheta - costheta * temp) / (
            params.length * (4.0 / 3.0 - params.masspole * costheta**2 / params.total_mass))
        xacc = temp - params.polemass_length * thetaacc * costheta / params.total_mass
        state = CartPoleState(x=state.x + params.tau * state.x_dot,
                              x_dot=state.x_dot + params.tau * xacc,
                              theta=state.theta + params.tau * state.theta_dot,
                              theta_dot=state.theta_dot + params.tau * thetaacc,
                              time=state.time + 1)
        # popjym's reward: -1 for a step taken from a terminal state (never, with auto-reset).
        reward = jnp.where(jnp.isclose(1.0 - prev_terminal, 0), -1.0,
                           1.0 / self.max_steps_in_episode)
        obs = jax.lax.stop_gradient(self.get_obs(state, params, key))
        return obs, jax.lax.stop_gradient(state), reward, self.is_terminated(state, params), {}

    def reset_env(self, key: jax.Array, params: CartPoleParams
                  ) -> tuple[jax.Array, CartPoleState]:
        """Start near upright: x, x_dot, theta, theta_dot uniform in [-0.05, 0.05] (as gymnax)."""
        init = jax.random.uniform(key, minval=-0.05, maxval=0.05, shape=(4,))
        key, _ = jax.random.split(key)
        state = CartPoleState(x=init[0], x_dot=init[1], theta=init[2], theta_dot=init[3],
                              time=jnp.int32(0))
        return self.get_obs(state, params, key), state

    def get_obs(self, state: CartPoleState, params: CartPoleParams, key: jax.Array
                ) -> jax.Array:
        """[x, theta] float32 [2], plus noise, clipped to the observation bounds."""
        obs = (jnp.array([state.x, state.theta])
               + jax.random.normal(key, shape=(2,)) * self.noise_sigma)
        space = self.observation_space(params)
        return jnp.clip(obs, space.low, space.high)

    def is_terminated(self, state: CartPoleState, params: CartPoleParams) -> jax.Array:
        """The cart or pole out of bounds, or `max_steps_in_episode` steps taken (popjym's)."""
        out_x = jnp.logical_or(state.x < -params.x_threshold, state.x > params.x_threshold)
        out_theta = jnp.logical_or(state.theta < -params.theta_threshold_radians,
                                   state.theta > params.theta_threshold_radians)
        return jnp.logical_or(jnp.logical_or(out_x, out_theta),
                              state.time >= self.max_steps_in_episode)

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """Push left (0) or right (1)."""
        return spaces.Discrete(2)

    def observation_space(self, params: CartPoleParams) -> spaces.Box:
        """x and theta within twice their termination bounds."""
        high = jnp.array([params.x_threshold * 2, params.theta_threshold_radians * 2])
        return spaces.Box(-high, high, (2,), dtype=jnp.float32)


# name -> (task class, its level's constructor arguments): popjym's levels.
PRESETS: dict[str, tuple[type, dict[str, Any]]] = {
    "RepeatFirstEasy-popgym": (RepeatFirst, {"num_decks": 1}),
    "RepeatFirstMedium-popgym": (RepeatFirst, {"num_decks": 8}),
    "RepeatFirstHard-popgym": (RepeatFirst, {"num_decks": 16}),
    "RepeatPreviousEasy-popgym": (RepeatPrevious, {"num_decks": 1, "k": 4}),
    "RepeatPreviousMedium-popgym": (RepeatPrevious, {"num_decks": 2, "k": 32}),
    "RepeatPreviousHard-popgym": (RepeatPrevious, {"num_decks": 3, "k": 64}),
    "CountRecallEasy-popgym": (CountRecall, {"num_decks": 1, "num_types": 2}),
    "CountRecallMedium-popgym": (CountRecall, {"num_decks": 2, "num_types": 4}),
    "CountRecallHard-popgym": (CountRecall, {"num_decks": 4, "num_types": 13}),
    "StatelessCartPoleEasy-popgym": (StatelessCartPole, {"max_steps_in_episode": 200}),
    "StatelessCartPoleMedium-popgym": (StatelessCartPole, {"max_steps_in_episode": 400}),
    "StatelessCartPoleHard-popgym": (StatelessCartPole, {"max_steps_in_episode": 600}),
}


def make(name: str, **params: Any) -> gymnax_env.GymnaxEnv:
    """Preset `name` as our env: constructor knobs in `params` override the level's, the rest
    replace EnvParams fields (checked first, one-line `EnvParamError`s, as for gymnax ids)."""
    env_class, level = PRESETS[name]

    def construct(**knobs: Any) -> environment.Environment:
        """The level's task with the given knobs replacing the level's."""
        return env_class(**{**level, **knobs})

    return gymnax_env.build(name, env_class, construct, params)
