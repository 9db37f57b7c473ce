"""POPGym memory tasks (`jaxrl_sys/envs/popgym.py`, `<Task><Level>-popgym`): shapes and specs,
episodes that end by termination at their length, what a perfect policy earns, the observation
of StatelessCartPole against gymnax's CartPole-v1, and same key -> same episode as popjym's own
code (kept verbatim below as the reference, since popjym is not installable). Also: MemoryChain's
`env.memory_length` below 1 is one line.
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

# name: (obs shape, number of actions, episode length)
EASY = {
    "RepeatFirstEasy-popgym": ((4,), 4, 52),
    "RepeatPreviousEasy-popgym": ((4,), 4, 52),
    "CountRecallEasy-popgym": ((4,), 27, 52),
    "StatelessCartPoleEasy-popgym": ((2,), 2, 200),
}

Policy = Callable[[jax.Array, jax.Array, Any], tuple[jax.Array, Any]]


def _gymnax(name: str, **params: Any) -> envs.GymnaxEnv:
    """Our adapter of preset `name`, without episode statistics."""
    return envs.make(name, episode_stats=False, **params)


def _rollout(env: Any, key: jax.Array, steps: int, policy: Policy, memory: Any):
    """`steps` steps of `env` (auto-reset) from a reset, acting `policy(key, obs, memory) ->
    (action, memory)`; returns rewards, terminated, truncated, each [steps]."""

    def step(carry, key):
        obs, state, memory = carry
        k_act, k_step = jax.random.split(key)
        action, memory = policy(k_act, obs, memory)
        obs, state, reward, terminated, truncated, _ = env.step(k_step, state, action)
        return (obs, state, memory), (reward, terminated, truncated)

    obs, state = env.reset(key)
    return jax.lax.scan(step, (obs, state, memory), jax.random.split(key, steps))[1]


_rollout = jax.jit(_rollout, static_argnums=(0, 2, 3))


def _random(n: int) -> Policy:
    """Uniformly random actions in 0..n-1; no memory."""
    return lambda key, obs, memory: (jax.random.randint(key, (), 0, n), memory)


def _repeat_first(key, obs, memory):
    """RepeatFirst's perfect policy: remember the first suit (memory: suit, step)."""
    first, t = memory
    first = jnp.where(t == 0, jnp.argmax(obs), first)
    return first, (first, t + 1)


def _repeat_previous(k: int) -> Policy:
    """RepeatPrevious's perfect policy: a ring of the last k suits (memory: ring [k], step)."""

    def policy(key, obs, memory):
        ring, t = memory
        action = ring[t % k]  # the suit shown k steps ago (any suit before step k)
        return action, (ring.at[t % k].set(jnp.argmax(obs)), t + 1)

    return policy


def _count_recall(num_types: int) -> Policy:
    """CountRecall's perfect policy: count the value cards seen (memory: counts [num_types])."""

    def policy(key, obs, counts):
        action = counts[jnp.argmax(obs[num_types:])]  # queried type's count before this card
        return action, counts + obs[:num_types].astype(jnp.int32)

    return policy


# ------------------------------------------------------------------- registry, specs, shapes


def test_the_twelve_presets_are_registered():
    assert set(registry.POPGYM_NAMES) == set(popgym.PRESETS) and len(popgym.PRESETS) == 12
    assert set(popgym.PRESETS) <= set(envs.names())


@pytest.mark.parametrize("name", list(EASY))
def test_easy_spec_and_shapes(name):
    obs_shape, num_actions, length = EASY[name]
    env = envs.make(name)
    assert env.spec.obs_shape == obs_shape and env.spec.action_space.n == num_actions
    assert env.spec.max_episode_steps == length and env.spec.name == name
    keys = jax.random.split(jax.random.PRNGKey(0), 3)  # [B] envs, as the rollouts vmap them
    obs, state = jax.vmap(env.reset)(keys)
    assert obs.shape == (3, *obs_shape) and obs.dtype == jnp.float32
    obs, state, reward, terminated, truncated, info = jax.vmap(env.step)(
        keys, state, jnp.zeros((3,), jnp.int32))
    assert obs.shape == (3, *obs_shape) and info["final_observation"].shape == obs.shape
    assert reward.shape == terminated.shape == truncated.shape == (3,)
    assert reward.dtype == jnp.float32 and terminated.dtype == jnp.bool_


@pytest.mark.parametrize("name", list(EASY))
def test_a_random_episode_ends_by_termination_at_its_length(name):
    _, num_actions, length = EASY[name]
    env = _gymnax(name)
    reward, terminated, truncated = map(np.asarray, _rollout(
        env, jax.random.PRNGKey(1), length, _random(num_actions), None))
    assert not truncated.any()
    if name.startswith("StatelessCartPole"):  # the pole falls first: +1/200 each step till then
        end = int(np.argmax(terminated))
        assert terminated.any() and end < length - 1
        np.testing.assert_allclose(reward[:end + 1], 1 / length, rtol=1e-6)
        return
    assert terminated[-1] and not terminated[:-1].any()
    scale = {"RepeatFirst": 1 / 51, "RepeatPrevious": 1 / 48, "CountRecall": 1 / 52}[
        name.removesuffix("Easy-popgym")]
    assert np.all(np.isclose(np.abs(reward), scale) | (reward == 0))
    assert -1.05 <= reward.sum() <= 1.05


def test_stateless_cartpole_terminates_at_its_time_limit():
    env = _gymnax("StatelessCartPoleEasy-popgym", max_steps_in_episode=8)
    assert env.spec.max_episode_steps == 8 and env.unwrapped.params.max_steps_in_episode == 8
    reward, terminated, truncated = map(np.asarray, _rollout(
        env, jax.random.PRNGKey(2), 8, _random(2), None))  # too few steps for the pole to fall
    assert terminated[-1] and not terminated[:-1].any() and not truncated.any()
    np.testing.assert_allclose(reward, 1 / 8, rtol=1e-6)
    assert reward.sum() == pytest.approx(1.0)


def test_a_time_limit_below_the_episode_length_truncates():
    env = _gymnax("RepeatFirstEasy-popgym", max_steps_in_episode=10)
    assert env.spec.max_episode_steps == 10
    _, terminated, truncated = map(np.asarray, _rollout(
        env, jax.random.PRNGKey(3), 10, _random(4), None))
    assert truncated[-1] and not truncated[:-1].any() and not terminated.any()


# ------------------------------------------------------------------- what a perfect policy earns


def test_repeat_first_pays_one_over_n_minus_1_per_step_to_the_first_suit():
    reward, terminated, _ = map(np.asarray, _rollout(
        _gymnax("RepeatFirstEasy-popgym"), jax.random.PRNGKey(4), 52, _repeat_first,
        (jnp.int32(0), jnp.int32(0))))
    np.testing.assert_allclose(reward, 1 / 51, rtol=1e-6)  # every one of the 52 steps scores
    assert reward.sum() == pytest.approx(52 / 51, rel=1e-5) and terminated[-1]

    def wrong(key, obs, memory):
        action, memory = _repeat_first(key, obs, memory)
        return (action + 1) % 4, memory

    reward = np.asarray(_rollout(_gymnax("RepeatFirstEasy-popgym"), jax.random.PRNGKey(4), 52,
                                 wrong, (jnp.int32(0), jnp.int32(0)))[0])
    np.testing.assert_allclose(reward, -1 / 51, rtol=1e-6)


@pytest.mark.parametrize("name, k, n", [("RepeatPreviousEasy-popgym", 4, 52),
                                        ("RepeatPreviousMedium-popgym", 32, 104)])
def test_repeat_previous_pays_one_over_n_minus_k_from_step_k(name, k, n):
    reward, terminated, _ = map(np.asarray, _rollout(
        _gymnax(name), jax.random.PRNGKey(5), n, _repeat_previous(k),
        (jnp.zeros((k,), jnp.int32), jnp.int32(0))))
    assert np.all(reward[:k] == 0)
    np.testing.assert_allclose(reward[k:], 1 / (n - k), rtol=1e-6)
    assert reward.sum() == pytest.approx(1.0, rel=1e-5) and terminated[-1]


@pytest.mark.parametrize("name, num_types, n, num_actions", [
    ("CountRecallEasy-popgym", 2, 52, 27), ("CountRecallHard-popgym", 13, 208, 17)])
def test_count_recall_perfect_counting_earns_the_maximum(name, num_types, n, num_actions):
    env = _gymnax(name)
    assert env.spec.action_space.n == num_actions  # every count a query can ask is an action
    reward, terminated, _ = map(np.asarray, _rollout(
        env, jax.random.PRNGKey(6), n, _count_recall(num_types),
        jnp.zeros((num_types,), jnp.int32)))
    np.testing.assert_allclose(reward, 1 / n, rtol=1e-6)
    assert reward.sum() == pytest.approx(1.0, rel=1e-5) and terminated[-1]


def test_stateless_cartpole_sees_the_full_cartpoles_x_and_theta():
    import gymnax

    full, full_params = gymnax.make("CartPole-v1")
    ours = _gymnax("StatelessCartPoleEasy-popgym").unwrapped
    key = jax.random.PRNGKey(7)
    actions = jax.random.randint(key, (30,), 0, 2)

    def both(carry, action):
        s_full, s_ours = carry
        o_full, s_full, _, _, _ = full.step_env(key, s_full, action, full_params)
        o_ours, s_ours, _, done, _ = ours.gymnax_env.step_env(key, s_ours, action, ours.params)
        return (s_full, s_ours), (o_full, o_ours, done)

    o_full, s_full = full.reset_env(key, full_params)
    o_ours, s_ours = ours.gymnax_env.reset_env(key, ours.params)
    np.testing.assert_array_equal(o_ours, o_full[jnp.array([0, 2])])
    o_full, o_ours, done = jax.jit(lambda c: jax.lax.scan(both, c, actions))((s_full, s_ours))[1]
    upright = ~np.cumsum(np.asarray(done)).astype(bool)  # before the pole fell (no clipping)
    upright[int(np.argmax(done))] = True
    np.testing.assert_allclose(o_ours[upright], o_full[upright][:, [0, 2]], rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------- popjym's own code as reference


def _reference(name: str) -> tuple[Any, Any]:
    """popjym's preset `name` (verbatim code below) and its default params."""
    task = name.removesuffix("-popgym")
    path, source = next(_POPJYM[t] for t in _POPJYM if task.startswith(t))
    namespace: dict[str, Any] = {}
    exec(compile(source, path, "exec"), namespace)  # noqa: S102  (our verbatim copy below)
    cartpole = namespace.get("NoisyStatelessCartPole")
    if cartpole is not None:  # gymnax 1.x's discount() asks is_terminated, old gymnax's is_terminal
        cartpole.is_terminated = cartpole.is_terminal
    env = namespace[task]()
    return env, env.default_params


@pytest.mark.parametrize("name", list(popgym.PRESETS))
def test_every_level_is_popjyms(name):
    ref, _ = _reference(name)
    env = _gymnax(name).unwrapped.gymnax_env
    knobs = [k for k in ("num_decks", "k", "num_types", "max_steps_in_episode", "noise_sigma")
             if hasattr(ref, k)]
    assert knobs and all(getattr(env, k) == getattr(ref, k) for k in knobs), knobs


@pytest.mark.parametrize("name", [n for n in popgym.PRESETS if "Medium" not in n])
def test_same_key_same_episode_as_popjym(name):
    ref, ref_params = _reference(name)
    ours = _gymnax(name).unwrapped
    env, params = ours.gymnax_env, ours.params
    steps = env.episode_length
    key, k_act = jax.random.split(jax.random.PRNGKey(8))
    keys, actions = jax.random.split(key, steps), jax.random.randint(k_act, (steps,), 0, 3)

    def both(carry, x):
        s_ours, s_ref = carry
        key, action = x
        o1, s_ours, r1, d1, _ = env.step_env(key, s_ours, action, params)
        o2, s_ref, r2, d2, _ = ref.step_env(key, s_ref, action, ref_params)
        return (s_ours, s_ref), (o1, r1, d1, o2, r2, d2)

    @jax.jit
    def episode(key):
        (o1, s_ours), (o2, s_ref) = env.reset_env(key, params), ref.reset_env(key, ref_params)
        s_ref = jax.tree.map(jnp.asarray, s_ref)
        return (o1, o2), jax.lax.scan(both, (s_ours, s_ref), (keys, actions))[1]

    (o1, o2), (obs, reward, done, ref_obs, ref_reward, ref_done) = episode(key)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(done, ref_done)
    np.testing.assert_allclose(reward, ref_reward, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(obs, ref_obs, rtol=1e-6, atol=1e-6)
    assert np.asarray(done).any()  # an episode ended in the steps compared


# ------------------------------------------------------------------- params from the command line


def test_level_knobs_are_env_params_as_for_gymnax_envs():
    _, kwargs = split_env_overrides(["env.num_decks=2", "env.k=8"])
    env = envs.make("RepeatPreviousEasy-popgym", **kwargs)
    assert env.unwrapped.gymnax_env.k == 8 and env.spec.max_episode_steps == 104
    _, kwargs = split_env_overrides(["env.max_steps_in_episode=50", "env.force_mag=5"])
    cart = envs.make("StatelessCartPoleHard-popgym", **kwargs).unwrapped
    assert cart.spec.max_episode_steps == 50 and cart.params.force_mag == 5.0
    assert envs.make("CountRecallEasy-popgym", num_types=4).spec.action_space.n == 14


@pytest.mark.parametrize("name, params, message", [
    ("RepeatFirstEasy-popgym", {"num_decks": 0}, "num_decks must be >= 1, got 0"),
    ("RepeatFirstEasy-popgym", {"num_decks": 1.5}, "expected an int"),
    ("RepeatFirstEasy-popgym", {"num_deks": 2}, "unknown param(s) num_deks"),
    ("RepeatPreviousEasy-popgym", {"k": 52}, "k must be below the 52 cards dealt, got 52"),
    ("CountRecallEasy-popgym", {"num_types": 0}, "num_types must be >= 1, got 0"),
    ("StatelessCartPoleEasy-popgym", {"max_steps_in_episode": 0}, "must be > 0"),
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


# popjym's code, verbatim: github.com/FLAIROx/popjym (commit d7b23ba, popjym/environments/),
# Apache License 2.0; Chris Lu's popjaxrl cleaned up by Edan Toledo. Only `_reference` above
# patches it, for gymnax 1.x (see there).
_POPJYM: dict[str, tuple[str, str]] = {}

_POPJYM["RepeatFirst"] = ("popjym/environments/popgym_repeat_first.py", r'''from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class EnvState:
    timestep: int
    cards: jnp.ndarray


@struct.dataclass
class EnvParams:
    pass


class RepeatFirst(environment.Environment):
    def __init__(self, num_decks=1):
        super().__init__()
        self.num_suits = 4
        self.decksize = 52
        self.num_decks = num_decks

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def step_env(
        self, key: chex.PRNGKey, state: EnvState, action: int, params: EnvParams
    ) -> Tuple[chex.Array, EnvState, float, bool, dict]:

        num_cards = self.decksize * self.num_decks
        reward_scale = 1.0 / (num_cards - 1.0)
        reward = jnp.where(state.cards[0] == action, reward_scale, -reward_scale)
        new_state = EnvState(state.timestep + 1, state.cards)
        terminated = new_state.timestep == num_cards
        obs = self.get_obs(new_state)

        return obs, new_state, reward, terminated, {}

    def reset_env(self, key: chex.PRNGKey, params: EnvParams) -> Tuple[chex.Array, EnvState]:
        """Performs resetting of environment."""
        cards = jnp.arange(self.decksize * self.num_decks) % self.num_suits
        cards = jax.random.permutation(key, cards)
        state = EnvState(
            timestep=0,
            cards=cards,
        )
        # obs = state.cards[state.timestep]
        obs = self.get_obs(state)
        return obs, state

    def get_obs(self, state: EnvState) -> chex.Array:
        """Returns observation from the state."""
        obs = jnp.zeros((self.num_suits,))
        obs = obs.at[state.cards[state.timestep % (self.decksize * self.num_decks)]].set(1)
        return obs

    def action_space(self, params: Optional[EnvParams] = None) -> spaces.Discrete:
        """Action space of the environment."""
        return spaces.Discrete(self.num_suits)

    def observation_space(self, params: EnvParams) -> spaces.Box:
        """Observation space of the environment."""
        return spaces.Box(
            jnp.zeros((self.num_suits,)),
            jnp.ones((self.num_suits,)),
            (self.num_suits,),
            dtype=jnp.float32,
        )


class RepeatFirstEasy(RepeatFirst):
    def __init__(self):
        super().__init__(num_decks=1)


class RepeatFirstMedium(RepeatFirst):
    def __init__(self):
        super().__init__(num_decks=8)


class RepeatFirstHard(RepeatFirst):
    def __init__(self):
        super().__init__(num_decks=16)
''')

_POPJYM["RepeatPrevious"] = ("popjym/environments/popgym_repeat_previous.py", r'''from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class EnvState:
    timestep: int
    cards: jnp.ndarray


@struct.dataclass
class EnvParams:
    pass


class RepeatPrevious(environment.Environment):
    def __init__(self, num_decks=1, k=4):
        super().__init__()
        self.num_suits = 4
        self.decksize = 52
        self.num_decks = num_decks
        self.k = k

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def step_env(
        self, key: chex.PRNGKey, state: EnvState, action: int, params: EnvParams
    ) -> Tuple[chex.Array, EnvState, float, bool, dict]:
        num_cards = self.decksize * self.num_decks
        reward_scale = 1.0 / (num_cards - self.k)
        reward = 0

        reward = jnp.where(
            state.cards[state.timestep - self.k] == action, reward_scale, -reward_scale
        )
        reward = jnp.where(state.timestep < self.k, 0, reward)
        new_state = EnvState(state.timestep + 1, state.cards)
        terminated = new_state.timestep == num_cards
        obs = self.get_obs(new_state)

        return obs, new_state, reward, terminated, {}

    def reset_env(self, key: chex.PRNGKey, params: EnvParams) -> Tuple[chex.Array, EnvState]:
        """Performs resetting of environment."""
        cards = jnp.arange(self.decksize * self.num_decks) % self.num_suits
        cards = jax.random.permutation(key, cards)
        state = EnvState(
            timestep=0,
            cards=cards,
        )
        # obs = state.cards[state.timestep]
        obs = self.get_obs(state)
        return obs, state

    def get_obs(self, state: EnvState) -> chex.Array:
        """Returns observation from the state."""
        obs = jnp.zeros((self.num_suits,))
        obs = obs.at[state.cards[state.timestep]].set(1)
        return obs

    def action_space(self, params: Optional[EnvParams] = None) -> spaces.Discrete:
        """Action space of the environment."""
        return spaces.Discrete(self.num_suits)

    def observation_space(self, params: EnvParams) -> spaces.Box:
        """Observation space of the environment."""
        return spaces.Box(
            jnp.zeros((self.num_suits,)),
            jnp.ones((self.num_suits,)),
            (self.num_suits,),
            dtype=jnp.float32,
        )


class RepeatPreviousEasy(RepeatPrevious):
    def __init__(self):
        super().__init__(num_decks=1, k=4)


class RepeatPreviousMedium(RepeatPrevious):
    def __init__(self):
        super().__init__(num_decks=2, k=32)


class RepeatPreviousHard(RepeatPrevious):
    def __init__(self):
        super().__init__(num_decks=3, k=64)
''')

_POPJYM["CountRecall"] = ("popjym/environments/popgym_count_recall.py", r'''from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class EnvState:
    timestep: int
    value_cards: jnp.ndarray
    query_cards: jnp.ndarray
    running_count: jnp.ndarray


@struct.dataclass
class EnvParams:
    pass


class CountRecall(environment.Environment):
    def __init__(self, num_decks=1, num_types=2):
        super().__init__()
        self.decksize = 52
        # self.error_clamp = error_clamp # NOT IMPLEMENTED
        self.num_decks = num_decks
        self.num_types = num_types
        self.num_cards = self.decksize * self.num_decks
        self.max_num = self.num_cards // self.num_types
        self.reward_scale = 1.0 / self.num_cards

    @property
    def default_params(self) -> EnvParams:
        return EnvParams()

    def step_env(
        self, key: chex.PRNGKey, state: EnvState, action: int, params: EnvParams
    ) -> Tuple[chex.Array, EnvState, float, bool, dict]:

        running_count = state.running_count.at[state.value_cards[state.timestep]].add(1)
        prev_count = state.running_count[state.query_cards[state.timestep]]

        reward = jnp.where(action == prev_count, self.reward_scale, -self.reward_scale)
        new_state = EnvState(
            state.timestep + 1, state.value_cards, state.query_cards, running_count
        )
        obs = self.get_obs(new_state)
        terminated = new_state.timestep == self.num_cards

        return obs, new_state, reward, terminated, {}

    def reset_env(self, key: chex.PRNGKey, params: EnvParams) -> Tuple[chex.Array, EnvState]:
        """Performs resetting of environment."""
        key, key_value, key_query = jax.random.split(key, 3)
        cards = jnp.arange(self.decksize * self.num_decks) % self.num_types
        value_cards = jax.random.permutation(key_value, cards)
        query_cards = jax.random.permutation(key_query, cards)
        running_count = jnp.zeros((self.num_types,))
        state = EnvState(
            timestep=0,
            value_cards=value_cards,
            query_cards=query_cards,
            running_count=running_count,
        )
        # obs = state.cards[state.timestep]
        obs = self.get_obs(state)
        return obs, state

    def get_obs(self, state: EnvState) -> chex.Array:
        """Returns observation from the state."""
        obs = jnp.zeros((2 * self.num_types))
        obs = obs.at[state.value_cards[state.timestep]].set(1)
        obs = obs.at[self.num_types + state.query_cards[state.timestep]].set(1)
        return obs

    def action_space(self, params: Optional[EnvParams] = None) -> spaces.Discrete:
        """Action space of the environment."""
        return spaces.Discrete(2)

    def observation_space(self, params: EnvParams) -> spaces.Box:
        """Observation space of the environment."""
        return spaces.Box(
            jnp.zeros((2 * self.num_types,)),
            jnp.ones((2 * self.num_types,)),
            (2 * self.num_types,),
            dtype=jnp.float32,
        )


class CountRecallEasy(CountRecall):
    def __init__(self):
        super().__init__(num_decks=1, num_types=2)


class CountRecallMedium(CountRecall):
    def __init__(self):
        super().__init__(num_decks=2, num_types=4)


class CountRecallHard(CountRecall):
    def __init__(self):
        super().__init__(num_decks=4, num_types=13)
''')

_POPJYM["StatelessCartPole"] = ("popjym/environments/popgym_cartpole.py", r'''from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces
from jax import lax


@struct.dataclass
class EnvState:
    x: float
    x_dot: float
    theta: float
    theta_dot: float
    time: int


@struct.dataclass
class EnvParams:
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


class NoisyStatelessCartPole(environment.Environment):
    """
    JAX Compatible version of CartPole-v1 OpenAI gym environment. Source:
    github.com/openai/gym/blob/master/gym/envs/classic_control/cartpole.py
    """

    def __init__(self, noise_sigma=0.0, max_steps_in_episode=200):
        super().__init__()
        self.obs_shape = (2,)
        self.noise_sigma = noise_sigma
        self.max_steps_in_episode = max_steps_in_episode

    @property
    def default_params(self) -> EnvParams:
        # Default environment parameters for CartPole-v1
        return EnvParams()

    def step_env(
        self, key: chex.PRNGKey, state: EnvState, action: int, params: EnvParams
    ) -> Tuple[chex.Array, EnvState, float, bool, dict]:
        """Performs step transitions in the environment."""
        prev_terminal = self.is_terminal(state, params)
        force = params.force_mag * action - params.force_mag * (1 - action)
        costheta = jnp.cos(state.theta)
        sintheta = jnp.sin(state.theta)

        temp = (
            force + params.polemass_length * state.theta_dot**2 * sintheta
        ) / params.total_mass
        thetaacc = (params.gravity * sintheta - costheta * temp) / (
            params.length * (4.0 / 3.0 - params.masspole * costheta**2 / params.total_mass)
        )
        xacc = temp - params.polemass_length * thetaacc * costheta / params.total_mass

        # Only default Euler integration option available here!
        x = state.x + params.tau * state.x_dot
        x_dot = state.x_dot + params.tau * xacc
        theta = state.theta + params.tau * state.theta_dot
        theta_dot = state.theta_dot + params.tau * thetaacc

        # Important: Reward is based on termination is previous step transition
        reward = 1.0 - prev_terminal
        reward = self.reward_transform(params, reward)

        # Update state dict and evaluate termination conditions
        state = EnvState(x, x_dot, theta, theta_dot, state.time + 1)
        done = self.is_terminal(state, params)

        return (
            lax.stop_gradient(self.get_obs(key, state, params)),
            lax.stop_gradient(state),
            reward,
            done,
            {"discount": self.discount(state, params)},
        )

    def reward_transform(self, params: EnvParams, reward: float):
        return jnp.where(jnp.isclose(reward, 0), -1.0, 1.0 / self.max_steps_in_episode)

    def reset_env(self, key: chex.PRNGKey, params: EnvParams) -> Tuple[chex.Array, EnvState]:
        """Performs resetting of environment."""
        init_state = jax.random.uniform(key, minval=-0.05, maxval=0.05, shape=(4,))
        key, _ = jax.random.split(key)
        state = EnvState(
            x=init_state[0],
            x_dot=init_state[1],
            theta=init_state[2],
            theta_dot=init_state[3],
            time=0,
        )
        return self.get_obs(key, state, params), state

    def get_obs(self, key: chex.PRNGKey, state: EnvState, params: EnvParams) -> chex.Array:
        """Applies observation function to state."""
        obs = (
            jnp.array([state.x, state.theta])
            + jax.random.normal(key, shape=(2,)) * self.noise_sigma
        )
        obs = jnp.clip(obs, self.observation_space(params).low, self.observation_space(params).high)
        return obs

    def is_terminal(self, state: EnvState, params: EnvParams) -> bool:
        """Check whether state is terminal."""
        # Check termination criteria
        done1 = jnp.logical_or(
            state.x < -params.x_threshold,
            state.x > params.x_threshold,
        )
        done2 = jnp.logical_or(
            state.theta < -params.theta_threshold_radians,
            state.theta > params.theta_threshold_radians,
        )

        # Check number of steps in episode termination condition
        done_steps = state.time >= self.max_steps_in_episode
        done = jnp.logical_or(jnp.logical_or(done1, done2), done_steps)
        return done

    @property
    def name(self) -> str:
        """Environment name."""
        return "CartPole-v1"

    @property
    def num_actions(self) -> int:
        """Number of actions possible in environment."""
        return 2

    def action_space(self, params: Optional[EnvParams] = None) -> spaces.Discrete:
        """Action space of the environment."""
        return spaces.Discrete(2)

    def observation_space(self, params: EnvParams) -> spaces.Box:
        """Observation space of the environment."""
        high = jnp.array(
            [
                params.x_threshold * 2,
                params.theta_threshold_radians * 2,
            ]
        )
        return spaces.Box(-high, high, (2,), dtype=jnp.float32)

    def state_space(self, params: EnvParams) -> spaces.Dict:
        """State space of the environment."""
        high = jnp.array(
            [
                params.x_threshold * 2,
                jnp.finfo(jnp.float32).max,
                params.theta_threshold_radians * 2,
                jnp.finfo(jnp.float32).max,
            ]
        )
        return spaces.Dict(
            {
                "x": spaces.Box(-high[0], high[0], (), jnp.float32),
                "x_dot": spaces.Box(-high[1], high[1], (), jnp.float32),
                "theta": spaces.Box(-high[2], high[2], (), jnp.float32),
                "theta_dot": spaces.Box(-high[3], high[3], (), jnp.float32),
                "time": spaces.Discrete(self.max_steps_in_episode),
            }
        )


class StatelessCartPoleEasy(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.0, max_steps_in_episode=200)


class StatelessCartPoleMedium(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.0, max_steps_in_episode=400)


class StatelessCartPoleHard(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.0, max_steps_in_episode=600)


class NoisyStatelessCartPoleEasy(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.1, max_steps_in_episode=200)


class NoisyStatelessCartPoleMedium(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.2, max_steps_in_episode=200)


class NoisyStatelessCartPoleHard(NoisyStatelessCartPole):
    def __init__(self):
        super().__init__(noise_sigma=0.3, max_steps_in_episode=200)
''')
