"""Tests for envs/: specs, the gymnax adapter, wrappers under auto-reset, and the registry."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.envs import registry
from jaxrl_sys.core.types import Box, Discrete, EnvSpec


def random_actions(env: Any, key: jax.Array, num_envs: int, steps: int) -> jax.Array:
    """Uniform random actions for every step and env, from the spec alone."""
    space = env.spec.action_space
    if isinstance(space, Discrete):
        return jax.random.randint(key, (steps, num_envs), 0, space.n)
    low, high = jnp.array(space.low), jnp.array(space.high)
    return jax.random.uniform(key, (steps, num_envs, *space.shape), minval=low, maxval=high)


@functools.cache
def cached_make(name: str, **kwargs: Any) -> Any:
    """One env object per configuration, so tests sharing it share compiled rollouts."""
    return envs.make(name, **kwargs)


@jax.jit(static_argnums=(0, 2, 3))
def _rollout(env: Any, key: jax.Array, num_envs: int, steps: int) -> tuple[Any, ...]:
    k_reset, k_act, k_step = jax.random.split(key, 3)
    actions = random_actions(env, k_act, num_envs, steps)
    step_keys = jax.random.split(k_step, steps * num_envs).reshape(steps, num_envs)
    obs0, state0 = jax.vmap(env.reset)(jax.random.split(k_reset, num_envs))

    def body(state, xs):
        keys, acts = xs
        obs, state, reward, term, trunc, info = jax.vmap(env.step)(keys, state, acts)
        return state, (obs, state, reward, term, trunc, info)

    final_state, ys = jax.lax.scan(body, state0, (step_keys, actions))
    return obs0, state0, final_state, ys


def rollout(env: Any, key: jax.Array, num_envs: int, steps: int) -> tuple[Any, ...]:
    """Jitted scan of the vmapped env with random actions (compiled once per env and shape).

    Returns (reset obs, reset state, final state, per-step (obs, state, reward, term, trunc, info)).
    """
    return _rollout(env, key, num_envs, steps)


# ------------------------------------------------------------------------------------ specs


CLASSIC = [
    ("CartPole-v1", (4,), Discrete(2), 500),
    ("Acrobot-v1", (6,), Discrete(3), 500),
    ("MountainCar-v0", (2,), Discrete(3), 200),
    ("Pendulum-v1", (3,), Box((1,), (-2.0,), (2.0,)), 200),
    ("MountainCarContinuous-v0", (2,), Box((1,), (-1.0,), (1.0,)), 999),
]


@pytest.mark.parametrize("name,obs_shape,action_space,max_steps", CLASSIC)
def test_classic_control_spec(name, obs_shape, action_space, max_steps):
    env = envs.make(name)
    assert env.spec == EnvSpec(name, obs_shape, "float32", action_space, max_steps)
    assert env.spec.discrete == isinstance(action_space, Discrete)
    obs, _ = env.reset(jax.random.key(0))
    assert obs.shape == obs_shape and obs.dtype == jnp.float32


def test_params_override_and_are_baked_in():
    env = envs.make("Pendulum-v1", episode_stats=False, max_steps_in_episode=17, max_torque=1.5)
    assert env.spec.max_episode_steps == 17
    assert env.spec.action_space == Box((1,), (-1.5,), (1.5,))
    assert env.params.max_steps_in_episode == 17 and env.params.max_torque == 1.5
    default = envs.make("Pendulum-v1").unwrapped.params  # defaults untouched
    assert default.max_steps_in_episode == 200 and default.max_torque == 2.0


def test_minatar_makes_and_steps_with_float32_obs():
    env = envs.make("Breakout-MinAtar")
    assert env.spec.obs_shape == (10, 10, 4) and env.spec.action_space == Discrete(3)
    obs, state = env.reset(jax.random.key(0))
    seen = [obs]
    for t in range(5):
        obs, state, reward, term, trunc, info = env.step(jax.random.key(t), state, t % 3)
        seen += [obs, info["final_observation"]]
    assert reward.dtype == jnp.float32 and term.dtype == jnp.bool_ and trunc.dtype == jnp.bool_
    for o in seen:
        assert o.shape == (10, 10, 4) and o.dtype == jnp.float32
        assert set(np.unique(np.asarray(o))) <= {0.0, 1.0} and float(o.sum()) > 0


def test_env_is_static_and_jit_does_not_retrace():
    env = envs.make("CartPole-v1")
    assert hash(env) == hash(env) and env != envs.make("CartPole-v1")
    traces = []

    @jax.jit
    def step(key, state):
        traces.append(1)
        return env.step(key, state, 1)

    @jax.jit(static_argnums=0)
    def reset(e, key):
        traces.append(1)
        return e.reset(key)

    _, state = reset(env, jax.random.key(0))
    _, state = reset(env, jax.random.key(1))
    for i in range(3):
        state = step(jax.random.key(i), state)[1]
    assert len(traces) == 2


# ------------------------------------------------------------------------- episode statistics


def reference_episodes(reward, term, trunc):
    """Plain-Python episode accounting over [steps, envs] arrays -> (done, return, length)."""
    steps, n = reward.shape
    done = np.zeros((steps, n), bool)
    ret = np.zeros((steps, n), np.float64)
    length = np.zeros((steps, n), np.int64)
    for e in range(n):
        acc, count = 0.0, 0
        for t in range(steps):
            acc += float(reward[t, e])
            count += 1
            if term[t, e] or trunc[t, e]:
                done[t, e], ret[t, e], length[t, e] = True, acc, count
                acc, count = 0.0, 0
    return done, ret, length


@pytest.mark.parametrize(
    "name,params",
    [
        ("CartPole-v1", {}),
        ("CartPole-v1", {"max_steps_in_episode": 25}),
        ("Pendulum-v1", {"max_steps_in_episode": 37}),
    ],
)
def test_episode_statistics_match_reference_under_auto_reset(name, params):
    env = cached_make(name, **params)
    steps, n = 600, 6
    _, _, final_state, (_, _, reward, term, trunc, info) = rollout(env, jax.random.key(3), n, steps)
    reward, term, trunc = map(np.asarray, (reward, term, trunc))
    done, ret, length = reference_episodes(reward, term, trunc)

    assert set(info) == {"final_observation", "episode_done", "episode_return", "episode_length"}
    assert info["episode_done"].dtype == jnp.bool_
    assert info["episode_return"].dtype == jnp.float32
    assert info["episode_length"].dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(info["episode_done"]), done)
    np.testing.assert_array_equal(np.asarray(info["episode_length"]), length)
    np.testing.assert_allclose(np.asarray(info["episode_return"]), ret, rtol=1e-5, atol=1e-3)
    assert done.sum() >= n  # several episodes finished in every setting

    limit = params.get("max_steps_in_episode")
    if limit is not None:
        assert trunc.any()
        assert np.all(length[trunc & ~term] == limit)  # truncated episodes are counted too
    if name == "Pendulum-v1":  # never terminates: every episode is cut at the limit
        assert not term.any() and np.array_equal(done, trunc)
        assert np.array_equal(np.nonzero(trunc[:, 0])[0], np.arange(limit - 1, steps, limit))
    # The in-progress episode's accumulators equal the reward since its last end.
    for e in range(n):
        ends = np.nonzero(done[:, e])[0]
        start = ends[-1] + 1 if len(ends) else 0
        assert int(final_state.episode_length[e]) == steps - start
        np.testing.assert_allclose(
            float(final_state.episode_return[e]), reward[start:, e].sum(), rtol=1e-5, atol=1e-3
        )


# ---------------------------------------------------------------------------- registry


def test_names_cover_required_envs():
    known = envs.names()
    for name in [c[0] for c in CLASSIC] + [
        f"{g}-MinAtar" for g in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
    ]:
        assert name in known
    assert "MNISTBandit-bsuite" not in known
    assert len(set(known)) == len(known)


def test_unknown_env_names_closest():
    with pytest.raises(envs.UnknownEnvError) as err:
        envs.make("CartPol-v1")
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    assert "'CartPol-v1'" in msg and "CartPole-v1" in msg and "\n" not in msg
    with pytest.raises(envs.UnknownEnvError, match="known envs include: CartPole-v1"):
        envs.make("qqqqzzzz")
    with pytest.raises(envs.UnknownEnvError, match="Breakout-MinAtar"):
        envs.make("breakout-minatar")


def test_gymnasium_prefix_is_reserved():
    with pytest.raises(envs.UnknownEnvError, match="runs in worker processes through the host loop"):
        envs.make("gymnasium:CartPole-v1")


def test_unknown_param_is_value_error_naming_valid_ones():
    with pytest.raises(ValueError, match=r"max_step\b.*valid: .*max_steps_in_episode") as err:
        envs.make("CartPole-v1", max_step=10)
    assert not isinstance(err.value, envs.UnknownEnvError) and "\n" not in str(err.value)


@dataclasses.dataclass(frozen=True, eq=False)
class _Counter:
    """A tiny pure-JAX env for registry tests: reward 1 per step, terminates after `length`."""

    length: int = 3

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec("Counter-test", (1,), "float32", Discrete(2), self.length)

    def reset(self, key):
        return jnp.zeros((1,), jnp.float32), jnp.zeros((), jnp.int32)

    def step(self, key, state, action):
        t = state + 1
        term = t >= self.length
        nxt = jnp.where(term, 0, t)
        info = {"final_observation": t.astype(jnp.float32)[None]}
        return nxt.astype(jnp.float32)[None], nxt, jnp.float32(1.0), term, jnp.bool_(False), info


def test_register_own_env_with_params_and_wrappers():
    envs.register("Counter-test", _Counter)
    try:
        with pytest.raises(ValueError, match="already registered"):
            envs.register("Counter-test", _Counter)
        with pytest.raises(ValueError, match="reserved"):
            envs.register("gymnasium:Foo", _Counter)
        assert "Counter-test" in envs.names()
        with pytest.raises(ValueError, match="valid: length"):
            envs.make("Counter-test", size=3)
        env = envs.make("Counter-test", length=4)
        assert isinstance(env, envs.EpisodeStatistics)
        assert env.spec.max_episode_steps == 4
        _, state = env.reset(jax.random.key(0))
        lengths = []
        for _ in range(8):
            _, state, _, _, _, info = env.step(jax.random.key(0), state, 0)
            lengths.append(int(info["episode_length"]))
        assert lengths == [0, 0, 0, 4, 0, 0, 0, 4]
        # A "module:attr" factory is imported on first make.
        envs.register("Counter-lazy", f"{__name__}:_Counter")
        lazy = envs.make("Counter-lazy", episode_stats=False, length=2)
        assert isinstance(lazy, _Counter) and lazy.length == 2
    finally:
        registry._OWN.pop("Counter-test", None)
        registry._OWN.pop("Counter-lazy", None)


# ---------------------------------------------------------------------------- determinism


def test_same_key_same_rollout():
    env = cached_make("CartPole-v1")  # compiled once for all three
    a = rollout(env, jax.random.key(11), 6, 600)
    b = rollout(env, jax.random.key(11), 6, 600)
    c = rollout(env, jax.random.key(12), 6, 600)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a[3][0]), np.asarray(c[3][0]))


# ------------------------------------------------------- constructor arguments, value checks


def test_gymnax_constructor_arguments_beside_env_params():
    sea = envs.make("DeepSea-bsuite", size=20, unscaled_move_cost=0.02)
    assert sea.spec.obs_shape == (20, 20) and sea.spec.max_episode_steps == 20
    assert sea.unwrapped.params.unscaled_move_cost == 0.02
    chain = envs.make("MemoryChain-bsuite", num_bits=3, memory_length=7)
    assert chain.unwrapped.gymnax_env.num_bits == 3 and chain.unwrapped.params.memory_length == 7
    with pytest.raises(envs.EnvParamError, match=r"unknown param\(s\) sise .*valid: size, "
                       r"action_mapping_key, max_steps_in_episode"):
        envs.make("DeepSea-bsuite", sise=20)
    with pytest.raises(envs.EnvParamError, match="refused its constructor argument.s. map_name: map_name must be '4x4' or '8x8'"):
        envs.make("FrozenLake-misc", map_name="9x9")  # the constructor's own refusal, one line


@pytest.mark.parametrize("name, params, message", [
    ("CartPole-v1", {"max_steps_in_episode": -5}, "env.max_steps_in_episode=-5 for env "
                                                   "'CartPole-v1': must be > 0"),
    ("CartPole-v1", {"max_steps_in_episode": 0}, "must be > 0"),
    ("CartPole-v1", {"max_steps_in_episode": 2.5}, "env.max_steps_in_episode=2.5 for env "
                                                    "'CartPole-v1': expected an int"),
    ("CartPole-v1", {"masspole": 0.0}, "env.masspole=0.0 for env 'CartPole-v1': must be > 0"),
    ("CartPole-v1", {"gravity": "strong"}, "expected a finite float"),
    ("DeepSea-bsuite", {"size": 0}, "env.size=0 for env 'DeepSea-bsuite': must be > 0"),
    ("MemoryChain-bsuite", {"num_bits": -1}, "must be > 0"),
    ("UmbrellaChain-bsuite", {"n_distractor": -2}, "must be >= 0"),
    ("FourRooms-misc", {"fail_prob": 1.5}, "env.fail_prob=1.5 for env 'FourRooms-misc': "
                                           "must be in [0, 1]"),
    ("Asterix-MinAtar", {"ramping": "sometimes"}, "expected true or false"),
    ("Acrobot-v1", {"available_torque": 1.0}, "expected an array of shape (3,)"),
    ("TicTacToe-v0", {"opponent": 3}, "env.opponent=3 for env 'TicTacToe-v0': expected a string"),
])
def test_env_values_outside_their_range_or_type_are_one_line(name, params, message):
    with pytest.raises(envs.EnvParamError) as error:
        envs.make(name, **params)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_env_values_are_cast_to_their_declared_type():
    cart = envs.make("CartPole-v1", max_steps_in_episode=1e3, force_mag=12).unwrapped.params
    assert cart.max_steps_in_episode == 1000 and type(cart.max_steps_in_episode) is int
    assert cart.force_mag == 12.0 and type(cart.force_mag) is float
    assert envs.make("Asterix-MinAtar", ramping=0).unwrapped.params.ramping is False


def test_bad_env_values_on_the_command_line_exit_2_before_anything_is_created(tmp_path, capsys):
    from jaxrl_sys.commands import train as train_script

    root = tmp_path / "runs"
    for argv, message in [
        (["--set", "env.max_steps_in_episode=-5"], "must be > 0"),
        (["--env", "DeepSea-bsuite", "--set", "env.size=2.5"], "expected an int"),
        (["--env", "DeepSea-bsuite", "--set", "env.sise=8"], "valid: size, action_mapping_key"),
    ]:
        code = train_script.main(["--no-progress", "--run-root", str(root), *argv])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not root.exists()


@pytest.mark.slow
def test_a_constructor_argument_from_the_command_line_trains(tmp_path, capsys):
    from jaxrl_sys.commands import train as train_script

    code = train_script.main(["--no-progress", "--env", "DeepSea-bsuite", "--set", "env.size=12",
                              "--total-steps", "1024", "--chunks", "1",
                              "--run-root", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "DeepSea-bsuite" in captured.err and "final mean return" in captured.out
