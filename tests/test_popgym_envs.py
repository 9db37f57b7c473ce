"""POPGym memory tasks (`jaxrl_sys/envs/popgym.py`, `<Task><Level>-popgym`).

Each task is checked by its rules: short episodes worked out by hand on a deal or a cart-pole
state chosen here (observations, rewards, and the step on which the episode terminates or is
truncated); the spec of every level; what a perfect policy earns over whole episodes;
StatelessCartPole against gymnax's CartPole-v1; same key -> same episode. Then the `popgym`
package itself (numpy, the paper's authors' code) plays the same deals and the same actions
as ours, level by level, and must pay the same rewards and end on the same step. Also: bad
level knobs, and MemoryChain's `env.memory_length` below 1, are one-line errors.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.core.config import split_env_overrides
from jaxrl_sys.envs import popgym, registry

# name: (observation shape, number of actions, steps in a whole episode)
LEVELS: dict[str, tuple[tuple[int, ...], int, int]] = {
    "RepeatFirstEasy-popgym": ((4,), 4, 51),
    "RepeatFirstMedium-popgym": ((4,), 4, 415),
    "RepeatFirstHard-popgym": ((4,), 4, 831),
    "RepeatPreviousEasy-popgym": ((4,), 4, 51),
    "RepeatPreviousMedium-popgym": ((4,), 4, 103),
    "RepeatPreviousHard-popgym": ((4,), 4, 155),
    "CountRecallEasy-popgym": ((4,), 27, 51),
    "CountRecallMedium-popgym": ((8,), 27, 103),
    "CountRecallHard-popgym": ((26,), 17, 207),
    "StatelessCartPoleEasy-popgym": ((2,), 2, 200),
    "StatelessCartPoleMedium-popgym": ((2,), 2, 400),
    "StatelessCartPoleHard-popgym": ((2,), 2, 600),
}
CARD_LEVELS = [name for name in LEVELS if not name.startswith("StatelessCartPole")]
CART_LEVELS = [name for name in LEVELS if name.startswith("StatelessCartPole")]

# A policy: (key, observation, memory) -> (action, memory).
Policy = Callable[[jax.Array, jax.Array, Any], tuple[jax.Array, Any]]


def _env(name: str, **params: Any) -> envs.GymnaxEnv:
    """Our adapter of task `name` (gymnax auto-reset), without episode statistics."""
    return envs.make(name, episode_stats=False, **params).unwrapped


def _task(env: envs.GymnaxEnv) -> Any:
    """The gymnax environment under our adapter (the task object with its knobs)."""
    return env.gymnax_env


def _one_hot(indices: list[int] | np.ndarray, size: int) -> np.ndarray:
    """Rows of one-hot float32 vectors."""
    return np.eye(size, dtype=np.float32)[np.asarray(indices)]


def _deal(first: list[int], num_cards: int, kinds: int) -> np.ndarray:
    """A deal whose first cards are `first`, the rest (unused by the hand-worked steps) cycling
    through the kinds: int32 [num_cards]."""
    rest = np.arange(num_cards - len(first)) % kinds
    return np.concatenate([first, rest]).astype(np.int32)


def _play(env: envs.GymnaxEnv, state: Any, actions: list[int]) -> dict[str, np.ndarray]:
    """Step `env` from `state` with `actions`: per step the observation the step produced
    (before any auto-reset), the reward and the two ends, as numpy arrays."""

    def step(state, action):
        _, state, reward, terminated, truncated, info = env.step(jax.random.PRNGKey(0), state,
                                                                 action)
        return state, (info["final_observation"], reward, terminated, truncated)

    outs = jax.lax.scan(step, state, jnp.asarray(actions, jnp.int32))[1]
    return dict(zip(("obs", "reward", "terminated", "truncated"), map(np.asarray, outs)))


def _rollout(env: Any, key: jax.Array, steps: int, policy: Policy, memory: Any):
    """`steps` steps from a reset with auto-reset, acting `policy`: per step the observation
    shown to the policy, the reward, terminated and truncated (each [steps, ...])."""

    def step(carry, key):
        obs, state, memory = carry
        key_act, key_step = jax.random.split(key)
        action, memory = policy(key_act, obs, memory)
        next_obs, state, reward, terminated, truncated, _ = env.step(key_step, state, action)
        return (next_obs, state, memory), (obs, reward, terminated, truncated)

    obs, state = env.reset(key)
    return jax.lax.scan(step, (obs, state, memory), jax.random.split(key, steps))[1]


_rollout = jax.jit(_rollout, static_argnums=(0, 2, 3))


def _random(num_actions: int) -> Policy:
    """Uniform random actions; no memory."""
    return lambda key, obs, memory: (jax.random.randint(key, (), 0, num_actions), memory)


# ------------------------------------------------------------------ perfect policies (memory)


def _remember_first(key, obs, memory):
    """RepeatFirst: keep the suit seen on the first step (memory: suit, step)."""
    first, t = memory
    first = jnp.where(t == 0, jnp.argmax(obs), first)
    return first, (first, t + 1)


def _remember_last(k: int) -> Policy:
    """RepeatPrevious: a ring of the last k suits seen, the one on show included (memory:
    ring [k], step); the answer is the oldest of them."""

    def policy(key, obs, memory):
        ring, t = memory
        ring = ring.at[t % k].set(jnp.argmax(obs))
        return ring[(t + 1) % k], (ring, t + 1)

    return policy


def _tally(num_types: int) -> Policy:
    """CountRecall: count the value cards seen, the one on show included (memory: counts)."""

    def policy(key, obs, counts):
        counts = counts + obs[:num_types].astype(jnp.int32)
        return counts[jnp.argmax(obs[num_types:])], counts

    return policy


def _balance(key, obs, previous):
    """StatelessCartPole: push toward the pole's fall, with the velocities taken from the
    difference of two successive observations (memory: the previous observation; 0.02 s per
    step)."""
    velocity = (obs - previous) / 0.02
    push = 0.1 * obs[0] + 0.2 * velocity[0] + obs[1] + 0.2 * velocity[1]
    return (push > 0).astype(jnp.int32), obs


# ------------------------------------------------------------------ registry, specs, shapes


def test_the_twelve_levels_are_registered():
    assert set(popgym.PRESETS) == set(LEVELS) == set(registry.POPGYM_NAMES)
    assert set(LEVELS) <= set(envs.names())


@pytest.mark.parametrize("name", list(LEVELS))
def test_spec_and_shapes(name):
    obs_shape, num_actions, length = LEVELS[name]
    env = envs.make(name)
    assert env.spec.name == name and env.spec.obs_shape == obs_shape
    assert env.spec.action_space.n == num_actions and env.spec.max_episode_steps == length
    keys = jax.random.split(jax.random.PRNGKey(0), 3)  # [B] envs, as the rollouts vmap them
    obs, state = jax.vmap(env.reset)(keys)
    assert obs.shape == (3, *obs_shape) and obs.dtype == jnp.float32
    obs, state, reward, terminated, truncated, info = jax.vmap(env.step)(
        keys, state, jnp.zeros((3,), jnp.int32))
    assert obs.shape == (3, *obs_shape) and info["final_observation"].shape == obs.shape
    assert reward.shape == terminated.shape == truncated.shape == (3,)
    assert reward.dtype == jnp.float32 and terminated.dtype == truncated.dtype == jnp.bool_
    if name in CARD_LEVELS:  # one card on show, one-hot (CountRecall: two)
        assert np.all(np.asarray(obs).sum(axis=-1) == (2 if "CountRecall" in name else 1))


def test_the_levels_knobs_are_the_papers():
    knobs = {name: {k: getattr(_task(_env(name)), k) for k in
                    ("num_decks", "k", "num_types", "max_steps_in_episode")
                    if hasattr(_task(_env(name)), k)} for name in LEVELS}
    assert [knobs[f"RepeatFirst{lv}-popgym"] for lv in ("Easy", "Medium", "Hard")] == [
        {"num_decks": 1}, {"num_decks": 8}, {"num_decks": 16}]
    assert [knobs[f"RepeatPrevious{lv}-popgym"] for lv in ("Easy", "Medium", "Hard")] == [
        {"num_decks": 1, "k": 4}, {"num_decks": 2, "k": 32}, {"num_decks": 3, "k": 64}]
    assert [knobs[f"CountRecall{lv}-popgym"] for lv in ("Easy", "Medium", "Hard")] == [
        {"num_decks": 1, "num_types": 2}, {"num_decks": 2, "num_types": 4},
        {"num_decks": 4, "num_types": 13}]
    assert [knobs[f"StatelessCartPole{lv}-popgym"] for lv in ("Easy", "Medium", "Hard")] == [
        {"max_steps_in_episode": 200}, {"max_steps_in_episode": 400},
        {"max_steps_in_episode": 600}]
    assert all(_task(_env(name)).noise_sigma == 0.0 for name in CART_LEVELS)


# ------------------------------------------------------------------ episodes worked out by hand

# The first nine cards dealt in the hand-worked card episodes (suits, or CountRecall's values).
FIRST_CARDS = [1, 3, 3, 0, 2, 1, 0, 3, 2]


def test_repeat_first_by_hand():
    env = _env("RepeatFirstEasy-popgym", max_steps_in_episode=8)  # truncate after 8 steps
    obs, state = _task(env).start(_deal(FIRST_CARDS, 52, 4))
    np.testing.assert_array_equal(obs, _one_hot([1], 4)[0])  # the first card: suit 1
    out = _play(env, state, [1, 1, 0, 1, 3, 1, 1, 1])  # suit 1 is right on every step
    np.testing.assert_array_equal(out["obs"], _one_hot(FIRST_CARDS[1:], 4))
    np.testing.assert_allclose(out["reward"], np.array([1, 1, -1, 1, -1, 1, 1, 1]) / 51,
                               rtol=1e-6)
    assert not out["terminated"].any()
    np.testing.assert_array_equal(out["truncated"], [0] * 7 + [1])


@pytest.mark.parametrize("k, actions, rewards", [
    # k=4: from step 3 on, the card shown three steps before the one on show (step 3: card 0)
    (4, [0, 0, 0, 1, 3, 0, 0, 2], np.array([0, 0, 0, 1, 1, -1, 1, 1]) / 48),
    # k=1: the card on show itself, scored from step 0
    (1, [1, 3, 3, 0, 2, 1, 0, 0], np.array([1, 1, 1, 1, 1, 1, 1, -1]) / 51),
])
def test_repeat_previous_by_hand(k, actions, rewards):
    env = _env("RepeatPreviousEasy-popgym", k=k, max_steps_in_episode=8)
    obs, state = _task(env).start(_deal(FIRST_CARDS, 52, 4))
    np.testing.assert_array_equal(obs, _one_hot([1], 4)[0])
    out = _play(env, state, actions)
    np.testing.assert_array_equal(out["obs"], _one_hot(FIRST_CARDS[1:], 4))
    np.testing.assert_allclose(out["reward"], rewards, rtol=1e-6)
    assert not out["terminated"].any()
    np.testing.assert_array_equal(out["truncated"], [0] * 7 + [1])


def test_count_recall_by_hand():
    env = _env("CountRecallEasy-popgym", max_steps_in_episode=8)
    values = _deal([0, 1, 1, 0, 1, 1, 1, 0, 0], 52, 2)
    queries = _deal([1, 0, 1, 1, 0, 0, 1, 0, 1], 52, 2)
    obs, state = _task(env).start(values, queries)
    np.testing.assert_array_equal(obs, [1, 0, 0, 1])  # value type 0, query type 1
    # Value cards of types (0, 1) shown so far, the one on show included, at steps 0..7:
    # (1,0) (1,1) (1,2) (2,2) (2,3) (2,4) (2,5) (3,5); the queried type's count is the answer:
    truth = [0, 1, 2, 2, 2, 2, 5, 3]
    actions = [0, 1, 1, 2, 2, 0, 5, 3]  # step 2 answers the count before the card on show
    out = _play(env, state, actions)
    np.testing.assert_array_equal(
        out["obs"], np.concatenate([_one_hot(values[1:9], 2), _one_hot(queries[1:9], 2)], 1))
    np.testing.assert_allclose(out["reward"], np.array([1, 1, -1, 1, 1, -1, 1, 1]) / 51,
                               rtol=1e-6)
    np.testing.assert_array_equal(np.sign(out["reward"]),
                                  np.where(np.array(actions) == truth, 1, -1))
    assert not out["terminated"].any()
    np.testing.assert_array_equal(out["truncated"], [0] * 7 + [1])


def test_stateless_cartpole_by_hand():
    env = _env("StatelessCartPoleEasy-popgym")
    task, params = _task(env), env.params
    # Euler steps move x and theta by 0.02 s times the velocities they had before the step.
    obs, state = task.start(jnp.array([0.1, -0.5, 0.02, 0.3]), params, jax.random.PRNGKey(0))
    np.testing.assert_allclose(obs, [0.1, 0.02], rtol=1e-6)
    out = _play(env, state, [1])
    np.testing.assert_allclose(out["obs"][0], [0.1 - 0.01, 0.02 + 0.006], rtol=1e-5)
    assert out["reward"][0] == pytest.approx(1 / 200) and not out["terminated"][0]
    # A pole just inside 12 degrees (0.2094 rad) and falling: the first step ends it, and pays.
    _, state = task.start(jnp.array([0.0, 0.0, 0.2094, 1.0]), params, jax.random.PRNGKey(0))
    out = _play(env, state, [0])
    assert out["terminated"][0] and not out["truncated"][0]
    assert out["reward"][0] == pytest.approx(1 / 200)
    # A cart past 2.4 m ends it too.
    _, state = task.start(jnp.array([2.39, 1.0, 0.0, 0.0]), params, jax.random.PRNGKey(0))
    assert _play(env, state, [1])["terminated"][0]


def test_stateless_cartpole_is_truncated_at_its_limit_and_pays_one():
    env = _env("StatelessCartPoleEasy-popgym", max_steps_in_episode=3)
    assert env.spec.max_episode_steps == 3 and env.params.max_steps_in_episode == 3
    _, state = _task(env).start(jnp.zeros(4), env.params, jax.random.PRNGKey(0))
    out = _play(env, state, [1, 0, 1])  # too few steps for the pole to fall
    np.testing.assert_array_equal(out["truncated"], [0, 0, 1])
    assert not out["terminated"].any()
    np.testing.assert_allclose(out["reward"], 1 / 3, rtol=1e-6)


# ------------------------------------------------------------------ whole episodes


@pytest.mark.parametrize("name", ["RepeatFirstEasy-popgym", "RepeatPreviousEasy-popgym",
                                  "CountRecallEasy-popgym"])
def test_card_episodes_terminate_when_the_deck_runs_out(name):
    _, num_actions, length = LEVELS[name]
    obs, reward, terminated, truncated = map(np.asarray, _rollout(
        _env(name), jax.random.PRNGKey(1), 2 * length, _random(num_actions), None))
    assert not truncated.any()
    assert list(np.flatnonzero(terminated)) == [length - 1, 2 * length - 1]
    points = {"RepeatFirst": 1 / 51, "RepeatPrevious": 1 / 48, "CountRecall": 1 / 51}[
        name.removesuffix("Easy-popgym")]
    assert np.all(np.isclose(np.abs(reward), points, rtol=1e-6) | (reward == 0))
    if name.startswith("RepeatPrevious"):  # the first three steps of each episode pay 0
        assert np.all(reward[[0, 1, 2, length, length + 1, length + 2]] == 0)
        assert np.count_nonzero(reward) == 2 * 48


def test_a_time_limit_below_the_episode_length_truncates():
    env = _env("RepeatFirstEasy-popgym", max_steps_in_episode=10)
    assert env.spec.max_episode_steps == 10
    _, _, terminated, truncated = map(np.asarray, _rollout(
        env, jax.random.PRNGKey(3), 20, _random(4), None))
    assert list(np.flatnonzero(truncated)) == [9, 19] and not terminated.any()


@pytest.mark.parametrize("name, policy, memory", [
    *[(f"RepeatFirst{lv}-popgym", _remember_first, (jnp.int32(0), jnp.int32(0)))
      for lv in ("Easy", "Medium", "Hard")],
    *[(f"RepeatPrevious{lv}-popgym", _remember_last(k), (jnp.zeros((k,), jnp.int32),
                                                          jnp.int32(0)))
      for lv, k in (("Easy", 4), ("Medium", 32), ("Hard", 64))],
    *[(f"CountRecall{lv}-popgym", _tally(types), jnp.zeros((types,), jnp.int32))
      for lv, types in (("Easy", 2), ("Medium", 4), ("Hard", 13))],
    *[(name, _balance, jnp.zeros(2)) for name in CART_LEVELS],
])
def test_a_perfect_policy_earns_one_per_episode(name, policy, memory):
    length = LEVELS[name][2]
    _, reward, terminated, truncated = map(np.asarray, _rollout(
        _env(name), jax.random.PRNGKey(4), length, policy, memory))
    assert reward.sum() == pytest.approx(1.0, rel=1e-4)
    assert np.all(reward >= 0)
    ended = terminated | truncated
    assert ended[-1] and not ended[:-1].any()
    # Card decks run out (termination); the balanced cart-pole is cut off (truncation).
    assert terminated[-1] == (name in CARD_LEVELS) and truncated[-1] == (name in CART_LEVELS)


def test_repeat_first_always_wrong_earns_minus_one():
    def wrong(key, obs, memory):
        action, memory = _remember_first(key, obs, memory)
        return (action + 1) % 4, memory

    reward = np.asarray(_rollout(_env("RepeatFirstEasy-popgym"), jax.random.PRNGKey(4), 51,
                                 wrong, (jnp.int32(0), jnp.int32(0)))[1])
    np.testing.assert_allclose(reward, -1 / 51, rtol=1e-6)


def test_stateless_cartpole_is_cartpole_v1_seen_through_x_and_theta():
    import gymnax

    full, full_params = gymnax.make("CartPole-v1")
    env = _env("StatelessCartPoleEasy-popgym")
    task, params = _task(env), env.params
    obs, state = task.reset_env(jax.random.PRNGKey(7), params)
    start = np.array([state.x, state.x_dot, state.theta, state.theta_dot])
    assert np.all(np.abs(start) <= 0.05)  # CartPole-v1's start
    np.testing.assert_array_equal(obs, start[[0, 2]])
    actions = jax.random.randint(jax.random.PRNGKey(8), (40,), 0, 2)

    def both(carry, action):
        ours, theirs = carry
        obs, ours, reward, fell, _ = task.step_env(jax.random.PRNGKey(0), ours, action, params)
        full_obs, theirs, _, full_fell, _ = full.step_env(jax.random.PRNGKey(0), theirs,
                                                          action, full_params)
        return (ours, theirs), (obs, reward, fell, full_obs, full_fell)

    obs, reward, fell, full_obs, full_fell = map(np.asarray, jax.lax.scan(
        both, (state, state), actions)[1])
    end = int(np.argmax(full_fell))
    assert full_fell.any() and end < 39  # random pushes drop the pole
    np.testing.assert_array_equal(fell[:end + 1], full_fell[:end + 1])
    np.testing.assert_array_equal(obs[:end + 1], full_obs[:end + 1][:, [0, 2]])
    np.testing.assert_allclose(reward, 1 / 200, rtol=1e-6)


@pytest.mark.parametrize("name", ["RepeatFirstEasy-popgym", "RepeatPreviousEasy-popgym",
                                  "CountRecallEasy-popgym", "StatelessCartPoleEasy-popgym"])
def test_same_key_same_episode(name):
    env, num_actions = _env(name), LEVELS[name][1]
    first, again, other = (
        [np.asarray(x) for x in _rollout(env, jax.random.PRNGKey(seed), 60,
                                         _random(num_actions), None)]
        for seed in (5, 5, 6))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])  # another key, another deal or start


# ------------------------------------------------------------------ the popgym package agrees


class _DealInOrder:
    """Stands in for a popgym env's numpy Generator: each `shuffle` lays the deck out in the
    next of the given orders, so that popgym deals the cards we chose."""

    def __init__(self, *orders: np.ndarray) -> None:
        self.orders = list(orders)

    def shuffle(self, cards: np.ndarray) -> None:
        cards[:] = self.orders.pop(0)


def _popgym_level(name: str) -> Any:
    """popgym's class for the same task and level (its cart-pole is PositionOnlyCartPole)."""
    popgym_envs = pytest.importorskip("popgym.envs")
    task = name.removesuffix("-popgym").replace("StatelessCartPole", "PositionOnlyCartPole")
    return getattr(popgym_envs, task)()


def _both_play(ours: envs.GymnaxEnv, state: Any, theirs: Any, choose: Callable[[], int]
               ) -> tuple[int, list[float]]:
    """Step our env (from `state`) and popgym's env side by side with the same actions, from
    `choose()`, until popgym's episode ends; every step the rewards, the ends and the
    observations must agree. Returns the number of steps and our rewards."""
    step = jax.jit(ours.step)
    rewards = []
    while True:
        action = choose()
        _, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(0), state,
                                                             jnp.int32(action))
        their_obs, their_reward, their_terminated, their_truncated, _ = theirs.step(action)
        t = len(rewards)
        assert float(reward) == pytest.approx(their_reward, rel=1e-6, abs=1e-9), t
        assert (bool(terminated), bool(truncated)) == (their_terminated, their_truncated), t
        np.testing.assert_array_equal(info["final_observation"], _seen(theirs, their_obs))
        rewards.append(float(reward))
        if their_terminated or their_truncated:
            return len(rewards), rewards


def _seen(theirs: Any, obs: Any) -> np.ndarray:
    """popgym's card observation in our layout: the card's index one-hot (CountRecall: the
    value's, then the query's)."""
    if hasattr(theirs, "num_distinct_cards"):
        return np.concatenate([_one_hot([obs[0]], theirs.num_distinct_cards)[0],
                               _one_hot([obs[1]], theirs.num_distinct_cards)[0]])
    return _one_hot([obs], 4)[0]


@pytest.mark.parametrize("name", CARD_LEVELS)
def test_popgym_pays_the_same_on_the_same_deal(name):
    theirs, ours = _popgym_level(name), _env(name)
    task, length = _task(ours), LEVELS[name][2]
    assert theirs.action_space.n == ours.spec.action_space.n
    rng = np.random.default_rng(9)
    if name.startswith("CountRecall"):
        assert theirs.num_distinct_cards == task.num_types
        assert theirs.value_deck.num_cards == task.num_cards
        value_order, query_order = rng.permutation(task.num_cards), rng.permutation(
            task.num_cards)
        theirs.np_random = _DealInOrder(value_order, query_order)
        their_obs, _ = theirs.reset()
        # popgym deals from the end of its deck; a card's type is its deck_idx_type entry.
        values = theirs.deck_idx_type[value_order[::-1]]
        queries = theirs.deck_idx_type[query_order[::-1]]
        obs, state = task.start(values, queries)

        def right() -> int:  # what popgym will pay for: its tally of the queried type
            return int(theirs.counts[theirs.query])
    else:
        assert theirs.deck.num_cards == task.num_cards and getattr(theirs, "k", 0) == getattr(
            task, "k", 0)
        order = rng.permutation(task.num_cards)
        theirs.np_random = _DealInOrder(order)
        their_obs, _ = theirs.reset()
        obs, state = task.start(theirs.deck.suits_idx[order[::-1]])

        def right() -> int:  # the suit popgym compares the action with (if it scores yet)
            if name.startswith("RepeatFirst"):
                return int(theirs.card)
            hand = theirs.deck["player"]
            return int(theirs.deck.suits_idx[hand[-theirs.k]]) if len(hand) >= theirs.k else 0

    np.testing.assert_array_equal(obs, _seen(theirs, their_obs))
    num_actions = ours.spec.action_space.n

    def choose() -> int:  # half right (by popgym's own state), half random
        return right() if rng.random() < 0.5 else int(rng.integers(num_actions))

    steps, rewards = _both_play(ours, state, theirs, choose)
    assert steps == length
    assert min(rewards) < 0 < max(rewards)  # both kinds of answer were compared


@pytest.mark.parametrize("name", CART_LEVELS)
def test_popgym_pays_the_same_from_the_same_cartpole_state(name):
    theirs, ours = _popgym_level(name), _env(name)
    task, length = _task(ours), LEVELS[name][2]
    assert theirs.max_episode_length == task.max_steps_in_episode == length
    start = np.array([0.01, -0.02, 0.03, 0.04], np.float32)

    # Random pushes: the pole falls; every observation matches (popgym computes in float64).
    theirs.reset()
    theirs.state = start.astype(np.float64)
    obs, state = task.start(start, ours.params, jax.random.PRNGKey(0))
    rng = np.random.default_rng(10)
    step = jax.jit(ours.step)
    for t in range(length):
        action = int(rng.integers(2))
        _, state, reward, terminated, truncated, info = step(jax.random.PRNGKey(0), state,
                                                             jnp.int32(action))
        their_obs, their_reward, their_terminated, their_truncated, _ = theirs.step(action)
        np.testing.assert_allclose(info["final_observation"], their_obs, atol=1e-5)
        assert float(reward) == pytest.approx(their_reward, rel=1e-6)
        assert (bool(terminated), bool(truncated)) == (their_terminated, their_truncated), t
        if their_terminated:
            break
    assert their_terminated and t < length - 1

    # Balanced by the same controller on each side (each on its own observations): the
    # whole limit is paid, and both cut the episode off (truncated, not terminated) at it.
    theirs.reset()
    theirs.state = start.astype(np.float64)
    obs, state = task.start(start, ours.params, jax.random.PRNGKey(0))
    our_memory, their_obs, their_memory = jnp.zeros(2), np.asarray(obs), np.zeros(2)
    total = 0.0
    for t in range(length):
        action, our_memory = _balance(None, obs, our_memory)
        their_action, their_memory = _balance(None, their_obs, their_memory)
        obs, state, reward, terminated, truncated, _ = step(jax.random.PRNGKey(0), state,
                                                            action)
        their_obs, their_reward, their_terminated, their_truncated, _ = theirs.step(
            int(their_action))
        assert float(reward) == pytest.approx(their_reward, rel=1e-6)
        assert (bool(terminated), bool(truncated)) == (their_terminated, their_truncated), t
        total += float(reward)
    assert their_truncated and not their_terminated and total == pytest.approx(1.0, rel=1e-4)


# ------------------------------------------------------------------ params from the command line


def test_level_knobs_are_env_params_as_for_gymnax_envs():
    _, kwargs = split_env_overrides(["env.num_decks=2", "env.k=8"])
    env = envs.make("RepeatPreviousEasy-popgym", **kwargs)
    assert env.unwrapped.gymnax_env.k == 8 and env.spec.max_episode_steps == 103
    _, kwargs = split_env_overrides(["env.max_steps_in_episode=50", "env.force_mag=5"])
    cart = envs.make("StatelessCartPoleHard-popgym", **kwargs).unwrapped
    assert cart.spec.max_episode_steps == 50 and cart.params.force_mag == 5.0
    _, kwargs = split_env_overrides(["env.noise_sigma=0.1"])
    assert envs.make("StatelessCartPoleEasy-popgym", **kwargs).unwrapped.gymnax_env.noise_sigma \
        == 0.1
    assert envs.make("CountRecallEasy-popgym", num_types=4).spec.action_space.n == 14


def test_noisy_observations_stay_within_bounds():
    env = _env("StatelessCartPoleEasy-popgym", noise_sigma=10.0)
    obs = np.asarray(_rollout(env, jax.random.PRNGKey(11), 20, _random(2), None)[0])
    high = np.array([4.8, 24 * np.pi / 180], np.float32)
    assert np.all(np.abs(obs) <= high + 1e-6) and np.any(np.isclose(np.abs(obs), high))


@pytest.mark.parametrize("name, params, message", [
    ("RepeatFirstEasy-popgym", {"num_decks": 0}, "num_decks must be >= 1, got 0"),
    ("RepeatFirstEasy-popgym", {"num_decks": 1.5}, "expected an int"),
    ("RepeatFirstEasy-popgym", {"num_deks": 2}, "unknown param(s) num_deks"),
    ("RepeatPreviousEasy-popgym", {"k": 52}, "k must be in 1..51 for 52 cards, got 52"),
    ("RepeatPreviousEasy-popgym", {"k": 0}, "k must be in 1..51 for 52 cards, got 0"),
    ("CountRecallEasy-popgym", {"num_types": 0}, "num_types must be >= 1, got 0"),
    ("StatelessCartPoleEasy-popgym", {"max_steps_in_episode": 0}, "must be > 0"),
    ("StatelessCartPoleEasy-popgym", {"noise_sigma": -0.1}, "noise_sigma must be >= 0"),
])
def test_bad_level_knobs_are_one_line(name, params, message):
    with pytest.raises(envs.EnvParamError) as error:
        envs.make(name, **params)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_memory_chain_memory_length_below_1_is_one_line_before_anything_is_built(tmp_path,
                                                                                  capsys):
    with pytest.raises(envs.EnvParamError) as error:
        envs.make("MemoryChain-bsuite", memory_length=0)
    assert str(error.value) == "env.memory_length=0 for env 'MemoryChain-bsuite': must be > 0"
    from jaxrl_sys.commands import train as train_script

    root = tmp_path / "runs"
    for env, setting, message in [
        ("MemoryChain-bsuite", "env.memory_length=0", "env.memory_length=0 for env "
                                                      "'MemoryChain-bsuite': must be > 0"),
        ("MemoryChain-bsuite", "env.memory_length=-3", "must be > 0"),
        ("RepeatFirstEasy-popgym", "env.num_decks=0", "num_decks must be >= 1"),
    ]:
        code = train_script.main(["--no-progress", "--run-root", str(root), "--agent", "ppo",
                                  "--env", env, "--set", setting, "--total-steps", "1000"])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not root.exists() or not any(root.iterdir())
