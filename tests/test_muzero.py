"""MuZero: unroll targets and masks, legal actions in search, device equivalence, learning."""

import dataclasses

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import optax
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import muzero
from jaxrl_sys.envs.tictactoe import perfect_player
from jaxrl_sys.tools import arena
from jaxrl_sys.runtime.driver import train
from jaxrl_sys.core.evaluation import make_eval_fn
from jaxrl_sys.runtime.execution import place, placement_fns
from jaxrl_sys.core.types import Discrete


def reference_targets(reward, next_values, terminated, truncated, valid, K, n, discount):
    """Targets and masks by a direct loop over every row and unroll step."""
    B = reward.shape[0]
    z = np.zeros((B, K + 1))
    alive = np.zeros((B, K + 1), bool)
    absorbing = np.zeros((B, K + 1), bool)
    for b in range(B):
        ended_by = None  # "terminated" / "truncated" once the start's episode is over
        for k in range(K + 1):
            if k > 0 and alive[b, k - 1] and (terminated[b, k - 1] or truncated[b, k - 1]):
                ended_by = "terminated" if terminated[b, k - 1] else "truncated"
            absorbing[b, k] = ended_by == "terminated"
            alive[b, k] = ended_by is None and all(valid[b, : k + 1])
            if not alive[b, k]:
                continue
            total = 0.0
            for i in range(n):
                j = k + i
                total += discount ** i * reward[b, j]
                if terminated[b, j]:
                    break
                last_valid = j + 1 >= valid.shape[1] or not valid[b, j + 1]
                if truncated[b, j] or i == n - 1 or last_valid:
                    total += discount ** (i + 1) * next_values[b, j]
                    break
            z[b, k] = total
    return z, alive, absorbing


@pytest.mark.parametrize("discount", [0.9, -1.0])
def test_unroll_targets_and_masks_match_a_reference(discount):
    K, n, B = 5, 4, 200
    rng = np.random.default_rng(0)
    length = K + n
    reward = rng.normal(size=(B, length)).astype(np.float32)
    next_values = rng.normal(size=(B, length)).astype(np.float32)
    terminated = rng.random((B, length)) < 0.12
    truncated = (rng.random((B, length)) < 0.08) & ~terminated
    cut = rng.integers(1, length + 1, size=B)  # sequences cut short by the write head
    cut[: B // 2] = length
    valid = np.arange(length)[None, :] < cut[:, None]
    z = muzero.unroll_value_targets(reward, next_values, terminated, truncated, valid, K, n,
                                    discount)
    alive, absorbing = muzero.unroll_masks(terminated, truncated, valid, K)
    z_ref, alive_ref, absorbing_ref = reference_targets(
        reward, next_values, terminated, truncated, valid, K, n, discount)
    np.testing.assert_array_equal(np.asarray(alive), alive_ref)
    np.testing.assert_array_equal(np.asarray(absorbing), absorbing_ref)
    np.testing.assert_allclose(np.where(alive_ref, np.asarray(z), 0), z_ref, rtol=1e-5,
                               atol=1e-5)
    assert alive_ref.sum() > 300 and absorbing_ref.sum() > 50  # both cases exercised


def reference_search_targets(reward, root_value, terminated, truncated, valid, K, n,
                             discount):
    """Targets from stored root values by a direct loop: n rewards then the root value n
    steps on; at a termination no bootstrap; where the next state was not searched (a
    truncation, the write head) the stored value of the state reached instead of its reward."""
    B, length = reward.shape
    z = np.zeros((B, K + 1))
    for b in range(B):
        for k in range(K + 1):
            total = 0.0
            for i in range(n):
                j = k + i
                if terminated[b, j]:
                    total += discount ** i * reward[b, j]
                    break
                if truncated[b, j] or j + 1 >= length or not valid[b, j + 1]:
                    total += discount ** i * root_value[b, j]
                    break
                total += discount ** i * reward[b, j]
                if i == n - 1:
                    total += discount ** n * root_value[b, j + 1]
            z[b, k] = total
    return z


@pytest.mark.parametrize("discount", [0.9, -1.0])
def test_search_value_targets_match_a_reference(discount):
    K, n, B = 5, 4, 200
    rng = np.random.default_rng(1)
    length = K + n + 1
    reward = rng.normal(size=(B, length)).astype(np.float32)
    root_value = rng.normal(size=(B, length)).astype(np.float32)
    terminated = rng.random((B, length)) < 0.12
    truncated = (rng.random((B, length)) < 0.08) & ~terminated
    cut = rng.integers(1, length + 1, size=B)
    cut[: B // 2] = length
    valid = np.arange(length)[None, :] < cut[:, None]
    z = muzero.search_value_targets(reward, root_value, terminated, truncated, valid, K, n,
                                    discount)
    alive, _ = muzero.unroll_masks(terminated, truncated, valid, K)
    z_ref = reference_search_targets(reward, root_value, terminated, truncated, valid, K, n,
                                     discount)
    alive = np.asarray(alive)
    np.testing.assert_allclose(np.where(alive, np.asarray(z), 0), np.where(alive, z_ref, 0),
                               rtol=1e-5, atol=1e-5)
    assert alive.sum() > 300


@pytest.mark.slow
def test_replay_stores_the_acting_search_root_value():
    """With value_bootstrap='search' the learner reads the root values the acting search
    stored: one collection step writes, for every env, the value its search returned."""
    from jaxrl_sys.agents.muzero import agent as muzero_agent
    from jaxrl_sys.core.rollout import legal_actions, per_env_keys

    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.default_config("CartPole-v1"), num_envs=8,
                                 num_simulations=4, value_bootstrap="search")
    agent = muzero.make(env, config, axis_name=None)
    ids = jnp.arange(config.num_envs)

    def collect_and_search(key):
        """One collection step, and the search it runs repeated by hand (one program)."""
        state = agent.init(jax.random.PRNGKey(0))
        env_state = muzero_agent.init_env_state(jax.random.PRNGKey(1), ids, env=env,
                                                capacity=config.buffer_size // config.num_envs)
        after, _ = muzero_agent.collect(state, env_state, key, env=env, config=config,
                                        search=agent.search, axis_name=None)
        search_key = jax.random.split(key, 3)[0]
        vstate = env_state.envs
        expected = muzero.search_rows(agent.search, state.params, vstate.obs,
                                      legal_actions(env, vstate.env_state),
                                      per_env_keys(search_key, ids), config.temperatures[0])
        return after, expected

    after, expected = jax.jit(collect_and_search)(jax.random.PRNGKey(2))
    stored = after.replay.replay.data["root_value"][:, 0]
    np.testing.assert_allclose(np.asarray(stored), np.asarray(expected.value), rtol=1e-6)
    assert np.abs(np.asarray(stored)).max() > 0


@pytest.mark.parametrize("search", ["gumbel", "muzero"])
@pytest.mark.slow
def test_search_never_chooses_an_illegal_action(search):
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(muzero.Config(), search=search, num_simulations=8)
    # a fake 6-action env spec, so that masks have room to bite
    spec = dataclasses.replace(env.spec, action_space=Discrete(6))
    agent = muzero.make(_SpecEnv(spec), config, axis_name=None)
    state = agent.init(jax.random.PRNGKey(0))
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    obs = jax.random.normal(keys[0], (512, 4))
    legal = jax.random.bernoulli(keys[1], 0.4, (512, 6))
    legal = legal.at[:, 5].set(legal[:, 5] | ~legal.any(-1))  # at least one legal action
    both = jax.jit(lambda p, o, l, k: [agent.search(p, o, l, k, 1.0, greedy=g)
                                       for g in (False, True)])
    for out in both(state.params, obs, legal, keys[2]):  # exploring, then greedy
        assert np.all(np.take_along_axis(np.asarray(legal), np.asarray(out.action)[:, None], 1))
        assert np.all(np.asarray(out.policy)[~np.asarray(legal)] == 0)


class _SpecEnv:
    """Only a spec: enough to build networks and search."""

    def __init__(self, spec):
        self.spec = spec


def run_muzero_chunk(num_devices: int, iters: int, **overrides):
    """One chunk of MuZero training on CartPole-v1 (16 envs, batch 64, learning from the
    fourth iteration; a small network unrolled 2 steps, which compiles in about 70% of the
    defaults' time) on `num_devices` devices; its parameters and metrics."""
    env = envs.make("CartPole-v1")
    config = dataclasses.replace(
        muzero.default_config("CartPole-v1"), num_envs=16, batch_size=64, learning_starts=64,
        num_simulations=4, total_steps=16 * 40, hidden=(32,), latent_dim=16, unroll_steps=2,
        **overrides)
    agent = muzero.make(env, config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, num_devices=num_devices,
                   iters_per_chunk=iters)
    carry = runner.init(np.asarray([3]))
    initial = jax.device_get(carry.agent_state.params)  # read before the chunk donates it
    carry, metrics = runner.run_chunk(carry)
    return initial, jax.device_get(carry.agent_state.params), jax.device_get(metrics)


@pytest.mark.parametrize("overrides", [{}, {"priority_alpha": 0.5, "reanalyse_fraction": 0.25}])
@pytest.mark.slow
def test_training_on_eight_devices_equals_one_device(overrides):
    """Acting, replay and learning together: each env's search noise comes from its global
    id and every device samples its slice of one global draw, so 8 devices run what one
    device runs (to rounding) with uniform priorities, the CartPole default. With
    prioritised replay the devices' priority masses differ, so only the first update is
    shared: that run stops after it, an update on reanalysed policies."""
    iters = 12 if not overrides else 4
    params_0, params_1, metrics_1 = run_muzero_chunk(1, iters, **overrides)
    _, params_8, metrics_8 = run_muzero_chunk(8, iters, **overrides)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                 params_8, params_1)
    np.testing.assert_allclose(metrics_8["loss"], metrics_1["loss"], rtol=1e-4)
    np.testing.assert_array_equal(metrics_8["episode_count"], metrics_1["episode_count"])
    # the parameters before the chunk (the first update comes in its fourth iteration)
    moved = jax.tree.map(lambda a, b: np.abs(a - b).max(), params_1, params_0)
    assert max(jax.tree.leaves(moved)) > 1e-3


def _force_rule_heads(params, end_bias: float, legal_bias):
    """Parameters whose rule heads say, whatever the state: every move ends the episode
    (end_bias > 0) or none does, and moves with legal_bias < 0 are illegal."""
    inner = params["params"]
    zero = lambda tree: jax.tree.map(jnp.zeros_like, tree)  # noqa: E731
    end = {"Dense_0": {"kernel": zero(inner["end_head"]["Dense_0"]["kernel"]),
                       "bias": jnp.full((1,), end_bias)}}
    legal = {"Dense_0": {"kernel": zero(inner["legal_head"]["Dense_0"]["kernel"]),
                         "bias": jnp.asarray(legal_bias, jnp.float32)}}
    return {"params": {**inner, "end_head": end, "legal_head": legal}}


@pytest.mark.slow
def test_rule_heads_make_predicted_ends_absorbing_and_predicted_illegal_moves_unpriored():
    env = envs.make("TicTacToe-v0")
    config = dataclasses.replace(muzero.default_config("TicTacToe-v0"), rule_heads=True)
    agent = muzero.make(env, config, axis_name=None)
    params = agent.init(jax.random.PRNGKey(0)).params
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (5, *env.spec.obs_shape))
    latent = agent.network.apply(params, obs.astype(jnp.float32),
                                 method=muzero.MuZeroNetwork.represent)
    root = muzero.TreeNode.root(latent, 5)
    action = jnp.arange(5)
    step = jax.jit(agent.recurrent_fn)
    key = jax.random.PRNGKey(2)

    ends = _force_rule_heads(params, 50.0, jnp.where(jnp.arange(9) < 4, -50.0, 50.0))
    out, child = step(ends, key, action, root)
    assert np.all(np.asarray(child.ended)) and np.all(np.asarray(out.discount) == 0)
    assert np.all(np.asarray(out.value) == 0)
    assert np.all(np.asarray(out.reward) != 0)  # the move that ends it keeps its reward
    prior = np.asarray(out.prior_logits)
    assert np.all(prior[:, :4] == muzero.NO_PRIOR) and np.all(prior[:, 4:] > -100)
    below, grandchild = step(ends, key, action, child)  # below the end: nothing happens
    assert np.all(np.asarray(below.reward) == 0) and np.all(np.asarray(below.value) == 0)
    np.testing.assert_array_equal(np.asarray(below.discount), 1.0)  # the end's value, kept
    assert np.all(np.asarray(grandchild.ended))

    goes_on = _force_rule_heads(params, -50.0, jnp.full(9, 50.0))
    out, child = step(goes_on, key, action, root)
    assert not np.any(np.asarray(child.ended))
    np.testing.assert_array_equal(np.asarray(out.discount), -1.0)  # the opponent moves next
    assert np.all(np.asarray(out.prior_logits) > -100)


def bounded_tic_tac_toe(max_steps: int):
    """pgx's tic-tac-toe truncated after `max_steps` moves (a small step bound)."""
    from jaxrl_sys.envs.pgx_env import PgxEnv

    env = PgxEnv("tic_tac_toe")
    env.spec = dataclasses.replace(env.spec, max_episode_steps=max_steps)
    return env


@pytest.mark.slow
def test_alphazero_tree_ends_a_branch_at_the_step_bound():
    """A move that crosses the env's step bound ends the branch with the network's value of
    the position reached (not the auto-reset game's), and revisits below it keep that value."""
    env = bounded_tic_tac_toe(2)
    config = dataclasses.replace(muzero.default_config("pgx:tic_tac_toe"), model="env",
                                 hidden=(32,), num_simulations=48, search="muzero")
    agent = muzero.make(env, config, axis_name=None)
    params = jax.jit(agent.init)(jax.random.PRNGKey(0)).params
    head = params["params"]["value_head"]["Dense_0"]
    params = {"params": {**params["params"],  # values far from 0, different per position
                         "value_head": {"Dense_0": {**head, "kernel": head["kernel"] * 300}}}}
    value_support, _ = muzero.supports(config)
    batch = 4
    reset, env_step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    tree_step = jax.jit(agent.recurrent_fn)  # one compile for all the tree steps below
    _, fresh = reset(jax.random.split(jax.random.PRNGKey(1), batch))
    _, state, *_ = env_step(jax.random.split(jax.random.PRNGKey(2), batch), fresh,
                            jnp.arange(batch))  # one move made: one left
    action, key = jnp.full(batch, 8), jax.random.PRNGKey(3)
    out, child = tree_step(params, key, action, muzero.TreeNode.root(state, batch))
    _, _, _, _, truncated, info = env_step(jax.random.split(key, batch), state, action)
    reached = jax.jit(lambda p, o: muzero.observation_values(agent.network, value_support, p, o))(
        params, info["final_observation"])
    assert np.all(np.asarray(truncated)) and np.all(np.asarray(child.ended))
    np.testing.assert_allclose(np.asarray(out.value), np.asarray(reached), rtol=1e-5)
    assert np.abs(np.asarray(reached)).min() > 0.05
    np.testing.assert_array_equal(np.asarray(out.discount), -config.gamma)
    below, _ = tree_step(params, key, action, child)
    assert np.all(np.asarray(below.reward) == 0) and np.all(np.asarray(below.discount) == 1)
    np.testing.assert_array_equal(np.asarray(below.value), np.asarray(out.value))

    # a whole search one move before the bound: every child keeps its end value however
    # often it is revisited (48 simulations over 8 moves)
    legal = jax.vmap(env.legal_actions)(state)
    latent = agent.network.apply(params, jax.vmap(lambda s: s.game.observation)(state)
                                 .astype(jnp.float32), method=muzero.MuZeroNetwork.represent)
    prior, value, _ = muzero.predict_scalar(agent.network, value_support, params, latent)
    root = mctx.RootFnOutput(prior_logits=prior, value=value,
                             embedding=muzero.TreeNode.root(state, batch))
    tree = jax.jit(lambda k: mctx.muzero_policy(
        params, k, root, agent.recurrent_fn, 48, invalid_actions=~legal,
        temperature=0.0))(jax.random.PRNGKey(4)).search_tree
    for move in range(9):
        node = np.asarray(tree.children_index[:, 0, move])
        visited = (node >= 0) & np.asarray(legal[:, move])
        step_out, _ = tree_step(params, jax.random.PRNGKey(0), jnp.full(batch, move),
                                muzero.TreeNode.root(state, batch))
        values = np.asarray(tree.node_values)[np.arange(batch), np.maximum(node, 0)]
        np.testing.assert_allclose(values[visited], np.asarray(step_out.value)[visited],
                                   rtol=1e-5, atol=1e-6)
    assert int(np.asarray(tree.children_visits[:, 0]).max()) > 1  # children were revisited


@pytest.mark.slow
def test_image_observations_get_the_residual_conv_torso():
    env = envs.make("Breakout-MinAtar")
    config = dataclasses.replace(muzero.Config(), num_simulations=2, conv_channels=8,
                                 res_blocks=1, latent_dim=16, hidden=(16,))
    agent = muzero.make(env, config, axis_name=None)
    assert agent.network.conv and len(env.spec.obs_shape) == 3
    params = jax.jit(agent.init)(jax.random.PRNGKey(0)).params
    assert "torso" in params["params"] and any(
        "Conv" in name for name in params["params"]["torso"])
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.1, (4, *env.spec.obs_shape))
    out = jax.jit(agent.search)(params, obs.astype(jnp.float32),
                                jnp.ones((4, env.spec.action_space.n), bool),
                                jax.random.PRNGKey(2))
    assert out.action.shape == (4,) and np.allclose(np.asarray(out.policy).sum(-1), 1.0)


def test_plane_latents_keep_the_board_and_the_dynamics_see_the_move_as_planes():
    """latent=planes: the latent of a [6, 7, 2] board is [6, 7, C] planes scaled to [0, 1] as
    a whole, the dynamics give next planes of that shape that depend on the move, and the
    search runs on them."""
    env = envs.make("pgx:connect_four")
    config = dataclasses.replace(muzero.default_config("pgx:connect_four"), latent="planes",
                                 conv_channels=4, res_blocks=1, hidden=(16,), num_simulations=4)
    agent = muzero.make(env, config, axis_name=None)
    params = jax.jit(agent.init)(jax.random.PRNGKey(0)).params
    assert "plane_dynamics" in params["params"] and "next_latent" not in params["params"]
    network = agent.network
    obs = jax.random.bernoulli(jax.random.PRNGKey(1), 0.3, (5, *env.spec.obs_shape))
    latent = network.apply(params, obs.astype(jnp.float32), method=muzero.MuZeroNetwork.represent)
    assert latent.shape == (5, 6, 7, 4)
    np.testing.assert_allclose(np.asarray(latent).reshape(5, -1).min(-1), 0.0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(latent).reshape(5, -1).max(-1), 1.0, atol=1e-4)
    after = [network.apply(params, latent, jnp.full(5, move), method=muzero.MuZeroNetwork.dynamics)
             for move in (0, 6)]
    assert after[0][0].shape == latent.shape and after[0][1].shape == (5, config.support_bins)
    assert after[0][2].shape == (5,)
    assert not np.allclose(np.asarray(after[0][0]), np.asarray(after[1][0]))
    legal = jnp.ones((5, env.spec.action_space.n), bool)
    out = jax.jit(agent.search)(params, obs.astype(jnp.float32), legal, jax.random.PRNGKey(2))
    assert out.action.shape == (5,) and np.allclose(np.asarray(out.policy).sum(-1), 1.0)


def test_plane_latents_need_images_and_alphazero_mode_keeps_its_torso():
    from jaxrl_sys.core.config import ConfigError

    config = dataclasses.replace(muzero.default_config("CartPole-v1"), latent="planes")
    with pytest.raises(ConfigError, match="latent=planes") as error:
        muzero.make(envs.make("CartPole-v1"), config)
    assert "\n" not in str(error.value)
    board = dataclasses.replace(muzero.default_config("pgx:connect_four"), latent="planes",
                                torso="mlp")
    assert muzero.build_network(envs.make("pgx:connect_four").spec, board).planes
    alphazero = muzero.build_network(envs.make("pgx:connect_four").spec,
                                     dataclasses.replace(board, model="env"))
    assert not alphazero.planes and not alphazero.conv


def test_config_rejects_bad_values_in_one_line():
    from jaxrl_sys.core.config import ConfigError

    for bad in (dict(search="alphazero"), dict(unroll_steps=0), dict(gamma=1.5),
                dict(temperatures=(1.0,)), dict(reanalyse_fraction=2.0),
                dict(buffer_size=10), dict(model="oracle"), dict(opening_plies=-1),
                dict(q_range=-1.0), dict(model="env", reanalyse_fraction=0.5),
                dict(rule_loss_weight=0.0), dict(value_bootstrap="fresh"),
                dict(latent="grid")):
        with pytest.raises(ConfigError) as error:
            dataclasses.replace(muzero.Config(), **bad).validate()
        assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="discrete"):
        muzero.make(envs.make("Pendulum-v1"), muzero.Config())


def applied_learning_rates(config, num_steps: int) -> np.ndarray:
    """The rate [num_steps] MuZero's optimiser applies at each of its first steps: with zero
    gradients its update is -rate * weight_decay * params (AdamW's decoupled decay)."""
    optimizer = muzero.build_optimizer(config)
    params = {"w": jnp.ones(())}

    def step(carry, _):
        params, opt_state = carry
        updates, opt_state = optimizer.update({"w": jnp.zeros(())}, opt_state, params)
        rate = -updates["w"] / (config.weight_decay * params["w"])
        return (optax.apply_updates(params, updates), opt_state), rate

    _, rates = jax.lax.scan(step, (params, optimizer.init(params)), None, length=num_steps)
    return np.asarray(rates)


@pytest.mark.slow
def test_learning_rate_reaches_its_final_fraction_at_the_last_learner_step():
    """The warm-up's iterations take no learner step, so the schedule counts learner steps:
    the full rate at the first, learning_rate * final_lr_fraction at the last."""
    config = dataclasses.replace(
        muzero.Config(), total_steps=4 * 30, num_envs=4, learning_starts=10,
        updates_per_iteration=2, batch_size=8, buffer_size=120, num_simulations=2,
        latent_dim=8, hidden=(8,), support_bins=5, learning_rate=1e-2, final_lr_fraction=0.1)
    agent = muzero.make(envs.make("CartPole-v1"), config, axis_name=None)

    def run(key):
        state = agent.init(key)
        env_state = agent.init_envs(key, jnp.arange(config.num_envs))
        iterate = lambda carry, k: (agent.train_step(*carry, k)[:2], None)  # noqa: E731
        keys = jax.random.split(key, config.num_iterations)
        return jax.lax.scan(iterate, (state, env_state), keys)[0][0]

    state = jax.jit(run)(jax.random.PRNGKey(0))
    # 30 iterations of 4 env steps; the gate opens in the third (12 >= 10 steps): 28 x 2
    learner_steps = int(state.updates)
    assert learner_steps == 56 == config.learner_steps and config.num_iterations == 30
    rates = applied_learning_rates(config, learner_steps)
    np.testing.assert_allclose(rates[0], 1e-2, rtol=1e-5)
    np.testing.assert_allclose(rates[-1], 1e-2 * 0.1, rtol=1e-5)
    assert np.all(np.diff(rates) < 0)


def train_muzero(env_name: str, config, seeds, chunks: int, eval_episodes: int):
    """Train with the execution layer; greedy search evaluation on the env's eval variant."""
    agent = muzero.make(envs.make(env_name), config)
    iters = -(-config.num_iterations // chunks)
    eval_fn = make_eval_fn(envs.make_eval(env_name), muzero.greedy_action(agent))
    runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters,
                   eval_fn=eval_fn, eval_episodes=eval_episodes)
    return agent, train(runner, np.asarray(seeds), -(-config.num_iterations // iters))


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.two_codegens
def test_alphazero_never_loses_tictactoe_to_the_perfect_player():
    """AlphaZero mode (the search steps the real game) with the TicTacToe-v0 preset and a small
    budget: no loss in 100 games against the perfect player, 50 in each seat. 20k steps pass
    under native, AVX2, AVX and SSE4_2 code; 10k steps lose 2 games as second player."""
    config = dataclasses.replace(muzero.default_config("TicTacToe-v0"), model="env",
                                 total_steps=20_000)
    agent, result = train_muzero("TicTacToe-v0", config, [0], chunks=1, eval_episodes=0)
    state = jax.tree.map(lambda x: x[0], result.carry.agent_state)
    env = envs.make("TicTacToe-v0")
    play = jax.jit(lambda s, k: arena.play(env, muzero.greedy_action(agent), s,
                                           perfect_player(env), None, k, jnp.arange(100)))
    results = np.asarray(play(state, jax.random.PRNGKey(7)))
    losses = {"first": int(np.sum(results[0::2] < 0)), "second": int(np.sum(results[1::2] < 0))}
    assert losses == {"first": 0, "second": 0}, losses
