"""POPGym's memory tasks as pure-JAX gymnax 1.x environments.

Four tasks of Morad et al. 2023, "POPGym: Benchmarking Partially Observable Reinforcement
Learning" (ICLR), each at the paper's Easy/Medium/Hard levels and registered as
`<Task><Level>-popgym`:

- RepeatFirst: cards are dealt one per step and the agent sees each one's suit; every step it
  must name the suit of the *first* card of the episode.
- RepeatPrevious: the same deal; from the step on which the k-th card is on show, it must name
  the suit of the k-th most recent card (the one on show counts as the first, so k=4 asks for
  the card shown three steps before the current one).
- CountRecall: two decks are dealt side by side, a value card and a query card per step; the
  agent must say how many value cards of the queried type have been shown so far, the one on
  show included.
- StatelessCartPole: CartPole-v1 with the two velocities hidden; only the cart position and
  the pole angle are observed.

The rules are written from the paper's task definitions and, where its prose leaves a detail
open (which card k counts from, whether the count includes the card on show, the episode
length), from the behaviour of the `popgym` package (PyPI, numpy; version 1.0.7), which
`tests/test_popgym_envs.py` checks ours against step by step: the same actions on the same
deal earn the same rewards and end on the same step. As in POPGym, rewards are scaled so that
an episode's return lies in [-1, 1]: a perfect card-task episode returns exactly 1, and a
cart-pole episode that survives its whole time limit returns 1.

Episodes: a deck of n = 52 x num_decks cards is dealt one card at reset and one per step, so a
card-task episode has n - 1 steps and *terminates* when the last card is shown. StatelessCartPole
terminates when the pole or cart leaves its bounds and is *truncated* (not terminated: the task
could go on) after `max_steps_in_episode` steps, as popgym's.

Knobs (constructor arguments, set from the command line as `--set env.<knob>=...`):
`num_decks` (card tasks), `k` (RepeatPrevious), `num_types` (CountRecall),
`max_steps_in_episode` and `noise_sigma` (StatelessCartPole). The card tasks also take
gymnax's `max_steps_in_episode` EnvParams field, whose default is the episode length; set
below it, it truncates the episode. StatelessCartPole's EnvParams are gymnax CartPole-v1's
(`force_mag`, `tau`, ...).

Observations are float32: a card's suit or type one-hot, or [x, theta]. Card tasks observe
nothing beyond the card, so the observation of step t says nothing about earlier cards; that
is what makes them memory tasks.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces
from gymnax.environments.classic_control import cartpole

from jaxrl_sys.envs import gymnax_env

CARDS_PER_DECK = 52
SUITS = 4

# (observation, state, reward, terminated, info): what gymnax's `step_env` returns.
Transition = tuple[jax.Array, Any, jax.Array, jax.Array, dict[str, Any]]


@struct.dataclass
class DealParams(environment.EnvParams):
    """The card tasks' EnvParams: only gymnax's time limit (`max_steps_in_episode`), whose
    default is set by each task to its episode length, so that the spec reports the length."""


@struct.dataclass
class Deal:
    """One shuffled deck for RepeatFirst and RepeatPrevious.

    suits: int32 [n], the suit of every card in the order dealt.
    time: int32 [], steps taken; the card on show is `suits[time]`.
    """

    suits: jax.Array
    time: jax.Array


@struct.dataclass
class CountDeal:
    """CountRecall's two decks and the tally the agent has to keep in its head.

    values, queries: int32 [n], the type of each value and query card in the order dealt.
    shown: int32 [num_types], how many value cards of each type have been shown so far,
        the one on show (`values[time]`) included.
    time: int32 [], steps taken.
    """

    values: jax.Array
    queries: jax.Array
    shown: jax.Array
    time: jax.Array


def _require(ok: bool, message: str) -> None:
    """Refuse a level knob: a ValueError, which `gymnax_env.build` turns into one line."""
    if not ok:
        raise ValueError(message)


def _shuffled(key: jax.Array, num_cards: int, num_kinds: int) -> jax.Array:
    """`num_cards` cards spread evenly over `num_kinds` kinds (card i is of kind i mod
    num_kinds), in a random order drawn from `key`: int32 [num_cards]."""
    return jax.random.permutation(key, jnp.arange(num_cards, dtype=jnp.int32) % num_kinds)


def _one_hot(index: jax.Array, size: int) -> jax.Array:
    """float32 [size] with a 1 at `index`."""
    return jax.nn.one_hot(index, size, dtype=jnp.float32)


class _CardTask(environment.Environment):
    """What the card tasks share: a deck of `num_decks` x 52 cards, one dealt at reset and one
    per step, so an episode has `num_cards - 1` steps and terminates as the last card shows.

    The time limit (`max_steps_in_episode`) only truncates when it comes first; at its default,
    the episode length, the end is a termination.
    """

    def __init__(self, num_decks: int) -> None:
        super().__init__()
        _require(num_decks >= 1, f"num_decks must be >= 1, got {num_decks}")
        self.num_decks = num_decks
        self.num_cards = CARDS_PER_DECK * num_decks

    @property
    def episode_length(self) -> int:
        """Steps from reset to the last card: every card but the one shown at reset."""
        return self.num_cards - 1

    @property
    def default_params(self) -> DealParams:
        """The time limit at the episode length (so it never cuts a whole episode short)."""
        return DealParams(max_steps_in_episode=self.episode_length)

    def is_terminated(self, state: Any, params: Any) -> jax.Array:
        """True once the last card is on show."""
        return state.time >= self.episode_length

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        """True where the time limit is reached before the deck runs out."""
        return (state.time >= params.max_steps_in_episode) & ~self.is_terminated(state, params)


class _SuitTask(_CardTask):
    """RepeatFirst and RepeatPrevious: the agent sees each card's suit and names a suit.

    A subclass says which card is asked about (`_asked`) and from which step answers count;
    a right answer earns `1 / scored_steps`, a wrong one loses as much, so a perfect episode
    returns 1 and a guess-at-random one about -0.5.
    """

    @property
    def scored_steps(self) -> int:
        """How many steps of an episode are scored."""
        raise NotImplementedError

    def _asked(self, state: Deal) -> tuple[jax.Array, jax.Array]:
        """The suit the agent should name at `state`, and whether this step is scored."""
        raise NotImplementedError

    def start(self, suits: jax.Array) -> tuple[jax.Array, Deal]:
        """An episode on the deal `suits` (int [num_cards], in dealing order), its first card
        on show: the observation and the state. `reset_env` deals a shuffled deck this way."""
        state = Deal(suits=jnp.asarray(suits, jnp.int32), time=jnp.int32(0))
        return self.get_obs(state), state

    def reset_env(self, key: jax.Array, params: DealParams) -> tuple[jax.Array, Deal]:
        """Shuffle the deck (13 x num_decks cards of each suit) and show its first card."""
        return self.start(_shuffled(key, self.num_cards, SUITS))

    def step_env(self, key: jax.Array, state: Deal, action: jax.Array,
                 params: DealParams) -> Transition:
        """Score the named suit, then show the next card."""
        suit, scored = self._asked(state)
        points = 1.0 / self.scored_steps
        reward = jnp.where(scored, jnp.where(action == suit, points, -points), 0.0)
        state = state.replace(time=state.time + 1)
        return (self.get_obs(state), state, reward.astype(jnp.float32),
                self.is_terminated(state, params), {})

    def get_obs(self, state: Deal, params: Any = None, key: Any = None) -> jax.Array:
        """The suit of the card on show, one-hot: float32 [4]."""
        return _one_hot(state.suits[state.time], SUITS)

    def observation_space(self, params: Any) -> spaces.Box:
        """A one-hot suit, float32 [4]."""
        return spaces.Box(0.0, 1.0, (SUITS,), jnp.float32)

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """The suit named, 0..3."""
        return spaces.Discrete(SUITS)


class RepeatFirst(_SuitTask):
    """Name the first card's suit on every step: +-1/(n-1) a step, n-1 steps for n cards.

    The first card is on show when the first answer is asked for, so step 0 is easy and the
    rest need the first suit remembered. Levels: 1, 8 and 16 decks.
    """

    def __init__(self, num_decks: int = 1) -> None:
        super().__init__(num_decks)

    @property
    def scored_steps(self) -> int:
        """Every step."""
        return self.episode_length

    def _asked(self, state: Deal) -> tuple[jax.Array, jax.Array]:
        """The first card's suit, always scored."""
        return state.suits[0], jnp.bool_(True)


class RepeatPrevious(_SuitTask):
    """Name the suit of the k-th most recent card, counting the card on show as the first.

    Answers count from the step on which the k-th card is on show (step k-1, steps counted
    from 0) to the end: n-k scored steps of +-1/(n-k) each; earlier steps pay 0. This is
    popgym's reading of "k steps back": k=1 asks for the card on show, k=4 for the one shown
    three steps before it. Levels: (1 deck, k=4), (2, 32), (3, 64).
    """

    def __init__(self, num_decks: int = 1, k: int = 4) -> None:
        super().__init__(num_decks)
        _require(1 <= k < self.num_cards,
                 f"k must be in 1..{self.num_cards - 1} for {self.num_cards} cards, got {k}")
        self.k = k

    @property
    def scored_steps(self) -> int:
        """Steps k-1 .. n-2."""
        return self.num_cards - self.k

    def _asked(self, state: Deal) -> tuple[jax.Array, jax.Array]:
        """The card k-1 places before the one on show, scored once it exists."""
        back = state.time - (self.k - 1)
        return state.suits[jnp.maximum(back, 0)], back >= 0


class CountRecall(_CardTask):
    """Each step shows a value card and a query card; answer how many value cards of the
    queried type have been shown so far, this step's included: +-1/(n-1) a step.

    Cards come in `num_types` types, dealt as evenly as the deck allows (POPGym's levels use
    colours, suits and ranks: 2, 4 and 13 types of 1, 2 and 4 decks). The answer is an action
    0..max_count, max_count being the most cards of one type in the deck (26, 26, 16 at the
    three levels). Observation float32 [2 * num_types]: the value card's type one-hot, then
    the query card's.
    """

    def __init__(self, num_decks: int = 1, num_types: int = 2) -> None:
        super().__init__(num_decks)
        _require(num_types >= 1, f"num_types must be >= 1, got {num_types}")
        self.num_types = num_types
        self.max_count = -(-self.num_cards // num_types)  # ceil(n / num_types)

    def start(self, values: jax.Array, queries: jax.Array) -> tuple[jax.Array, CountDeal]:
        """An episode on the deals `values` and `queries` (int [num_cards] types, in dealing
        order), their first cards on show and the first value card tallied: the observation
        and the state. `reset_env` deals two shuffled decks this way."""
        values = jnp.asarray(values, jnp.int32)
        state = CountDeal(values=values, queries=jnp.asarray(queries, jnp.int32),
                          shown=jnp.zeros((self.num_types,), jnp.int32).at[values[0]].set(1),
                          time=jnp.int32(0))
        return self.get_obs(state), state

    def reset_env(self, key: jax.Array, params: DealParams) -> tuple[jax.Array, CountDeal]:
        """Shuffle the value and the query deck independently and start on them."""
        key_values, key_queries = jax.random.split(key)
        return self.start(_shuffled(key_values, self.num_cards, self.num_types),
                          _shuffled(key_queries, self.num_cards, self.num_types))

    def step_env(self, key: jax.Array, state: CountDeal, action: jax.Array,
                 params: DealParams) -> Transition:
        """Score the answer to the query on show, then show the next pair and tally it."""
        truth = state.shown[state.queries[state.time]]
        points = 1.0 / self.episode_length
        reward = jnp.where(action == truth, points, -points).astype(jnp.float32)
        time = state.time + 1
        state = state.replace(shown=state.shown.at[state.values[time]].add(1), time=time)
        return self.get_obs(state), state, reward, self.is_terminated(state, params), {}

    def get_obs(self, state: CountDeal, params: Any = None, key: Any = None) -> jax.Array:
        """[value type one-hot, query type one-hot]: float32 [2 * num_types]."""
        return jnp.concatenate([_one_hot(state.values[state.time], self.num_types),
                                _one_hot(state.queries[state.time], self.num_types)])

    def observation_space(self, params: Any) -> spaces.Box:
        """Two one-hot types, float32 [2 * num_types]."""
        return spaces.Box(0.0, 1.0, (2 * self.num_types,), jnp.float32)

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """The count answered, 0..max_count."""
        return spaces.Discrete(self.max_count + 1)


class StatelessCartPole(environment.Environment):
    """CartPole-v1 observed through [x, theta] only: the velocities must be inferred.

    The physics and the bounds (|x| <= 2.4, |theta| <= 12 degrees) are gymnax's CartPole-v1,
    which this task steps underneath and whose EnvParams it takes; the start is CartPole-v1's
    (x, x_dot, theta, theta_dot uniform in [-0.05, 0.05]). Every step pays
    1/max_steps_in_episode, the one on which the pole falls included, so an episode that lasts
    the whole limit returns 1. Leaving the bounds terminates; reaching the limit truncates.
    Levels: 200, 400 and 600 steps. With `noise_sigma` > 0 the observation gets Gaussian noise
    of that standard deviation, clipped to the observation bounds (POPGym's
    NoisyPositionOnlyCartPole); the levels have none. Without noise the observation needs no
    clipping: the episode ends before x or theta can reach twice its bound.
    """

    def __init__(self, max_steps_in_episode: int = 200, noise_sigma: float = 0.0) -> None:
        super().__init__()
        _require(max_steps_in_episode >= 1,
                 f"max_steps_in_episode must be >= 1, got {max_steps_in_episode}")
        _require(noise_sigma >= 0.0, f"noise_sigma must be >= 0, got {noise_sigma}")
        self.max_steps_in_episode = max_steps_in_episode
        self.noise_sigma = noise_sigma
        self.full = cartpole.CartPole()

    @property
    def default_params(self) -> cartpole.EnvParams:
        """CartPole-v1's physics with this level's time limit."""
        return cartpole.EnvParams(max_steps_in_episode=self.max_steps_in_episode)

    def start(self, full_state: jax.Array, params: cartpole.EnvParams, key: jax.Array
              ) -> tuple[jax.Array, cartpole.EnvState]:
        """An episode from `full_state` = [x, x_dot, theta, theta_dot] (float [4]): the
        observation (noise drawn from `key`) and the state."""
        x, x_dot, theta, theta_dot = jnp.asarray(full_state, jnp.float32)
        state = cartpole.EnvState(x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot,
                                  time=jnp.int32(0))
        return self.get_obs(state, params, key), state

    def reset_env(self, key: jax.Array, params: cartpole.EnvParams
                  ) -> tuple[jax.Array, cartpole.EnvState]:
        """CartPole-v1's start: all four state variables uniform in [-0.05, 0.05]."""
        key_start, key_noise = jax.random.split(key)
        return self.start(jax.random.uniform(key_start, (4,), minval=-0.05, maxval=0.05),
                          params, key_noise)

    def step_env(self, key: jax.Array, state: cartpole.EnvState, action: jax.Array,
                 params: cartpole.EnvParams) -> Transition:
        """One CartPole-v1 step; the reward is the same for every step taken."""
        _, state, _, fell, _ = self.full.step_env(key, state, action, params)
        reward = jnp.float32(1.0 / self.max_steps_in_episode)
        return self.get_obs(state, params, key), state, reward, fell, {}

    def get_obs(self, state: cartpole.EnvState, params: cartpole.EnvParams,
                key: jax.Array) -> jax.Array:
        """[x, theta] float32 [2], plus the observation noise (if any), within the bounds."""
        seen = jnp.stack([state.x, state.theta]).astype(jnp.float32)
        if self.noise_sigma > 0.0:
            bounds = self.observation_space(params)
            seen = jnp.clip(seen + self.noise_sigma * jax.random.normal(key, (2,)),
                            bounds.low, bounds.high)
        return seen

    def is_terminated(self, state: cartpole.EnvState, params: cartpole.EnvParams
                      ) -> jax.Array:
        """The cart or the pole out of bounds."""
        return self.full.is_terminated(state, params)

    def observation_space(self, params: cartpole.EnvParams) -> spaces.Box:
        """x and theta, each within twice its termination bound: float32 [2]."""
        high = jnp.array([2.0 * params.x_threshold, 2.0 * params.theta_threshold_radians],
                         jnp.float32)
        return spaces.Box(-high, high, (2,), jnp.float32)

    def action_space(self, params: Any = None) -> spaces.Discrete:
        """Push the cart left (0) or right (1)."""
        return spaces.Discrete(2)


# Registered name -> (task, the level's constructor arguments): the paper's levels.
PRESETS: dict[str, tuple[type[environment.Environment], dict[str, Any]]] = {
    **{f"RepeatFirst{level}-popgym": (RepeatFirst, {"num_decks": decks})
       for level, decks in (("Easy", 1), ("Medium", 8), ("Hard", 16))},
    **{f"RepeatPrevious{level}-popgym": (RepeatPrevious, {"num_decks": decks, "k": k})
       for level, decks, k in (("Easy", 1, 4), ("Medium", 2, 32), ("Hard", 3, 64))},
    **{f"CountRecall{level}-popgym": (CountRecall, {"num_decks": decks, "num_types": types})
       for level, decks, types in (("Easy", 1, 2), ("Medium", 2, 4), ("Hard", 4, 13))},
    **{f"StatelessCartPole{level}-popgym": (StatelessCartPole, {"max_steps_in_episode": steps})
       for level, steps in (("Easy", 200), ("Medium", 400), ("Hard", 600))},
}


def make(name: str, **params: Any) -> gymnax_env.GymnaxEnv:
    """The registered task `name` as our env.

    `params` holds constructor knobs, which replace the level's, and EnvParams fields (e.g.
    `max_steps_in_episode` of a card task, `force_mag` of the cart-pole); names and values are
    checked before anything is built and a bad one is a one-line `EnvParamError`.
    """
    task, level = PRESETS[name]

    def construct(**knobs: Any) -> environment.Environment:
        """The task at this level, with `knobs` replacing the level's settings."""
        return task(**{**level, **knobs})

    return gymnax_env.build(name, task, construct, params)
