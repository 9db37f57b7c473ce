"""What every quantity of two-player self-play means, checked on hand-built connect-four cases.

The conventions (docs/design/board-games.md, "What each quantity means"):

- Ply t of a game is played by the side to move at t. The env's observation at t is from that
  side's view (its own pieces first) and the reward of ply t is that side's: +1 for a winning
  move, 0 otherwise (connect four rewards no other move).
- A value is always the value for the side to move at the state it belongs to. The value of the
  state after a move is the opponent's, so the tree and the n-step targets use discount
  -gamma (mctx: Q(s, a) = r + discount * v(s')); a terminal step has discount 0 and value 0.
- With gamma 1 and n covering a whole game, the value target of ply t is the game's result for
  the side that moved at t: +1 for every ply of the winner, -1 for every ply of the loser,
  0 in a draw; no target reads a reward or value of the next game after an auto-reset.
- Replay row t holds the observation at t with the legal moves, search policy, action, reward
  and flags of ply t; row t+1 holds the observation the env gave after ply t.
- Illegal moves get no prior and no visit, at the root and at every interior node.
- The policy target is the search's improved policy (Gumbel: softmax of prior logits plus the
  transformed completed Q), zero on illegal moves; self-play acts with the config's
  temperature, evaluation greedily.
- The arena's results are the agent's: +1 when the agent won, whichever seat it held.

Each test runs in seconds (no training); the search tests use an untrained network, so they
check what the tree itself proves (a win in one, a forced block), not what a net learned.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from jaxrl_sys import envs
from jaxrl_sys.agents import muzero
from jaxrl_sys.agents.muzero import agent as muzero_agent
from jaxrl_sys.core import replay, two_player
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.core.rollout import legal_actions
from jaxrl_sys.tools import arena

GAME = "pgx:connect_four"


@pytest.fixture(scope="module")
def env():
    return envs.make(GAME)


@pytest.fixture(scope="module")
def step_fn(env):
    return jax.jit(env.step)


def play_moves(env, step_fn, moves, seed=0):
    """(observation, state, rewards, ended) after playing `moves` from a fresh game."""
    obs, state = env.reset(jax.random.PRNGKey(seed))
    rewards, ended = [], []
    for m in moves:
        obs, state, reward, terminated, truncated, _ = step_fn(jax.random.PRNGKey(1), state,
                                                               jnp.int32(m))
        rewards.append(float(reward))
        ended.append(bool(terminated | truncated))
    return obs, state, rewards, ended


def observation(state):
    """The env's observation of a position: the mover's view, float32."""
    game = getattr(state, "env_state", state).game  # under the episode-statistics wrapper
    return game.observation.astype(jnp.float32)


def stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def alphazero(env, **overrides):
    """The shipped pgx AlphaZero agent (`model=env`), with `overrides`, untrained."""
    config = dataclasses.replace(muzero.default_config(GAME), model="env", **overrides)
    agent = muzero.make(env, config, axis_name=None)
    return agent, jax.jit(agent.init)(jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def shipped(env):
    """`alphazero(env)` with no overrides, shared by the search tests (so are its compiled
    searches)."""
    return alphazero(env)


@pytest.fixture(scope="module")
def greedy_search(env, shipped):
    """The shipped agent's greedy search from positions (`agent.search`, key 0), compiled
    once: search(params, positions [B]) -> SearchOutput."""
    agent, _ = shipped

    @jax.jit
    def search(params, positions):
        obs = jax.vmap(observation)(positions)
        return agent.search(params, obs, legal_actions(env, positions),
                            jax.random.PRNGKey(0), 1.0, True, positions)

    return search


# Hand-built positions. Columns are actions 0..6; the opener ("A") plays first.
# A: 0,0,0 and B: 1,1 -- B to move must block column 0 (six of seven moves lose at once)
FORCED_BLOCK = (0, 1, 0, 1, 0)
# A: 0,0,0 and B: 1,1,1 -- A to move wins at once in column 0 (and must, or B wins in 1)
WIN_IN_ONE = (0, 1, 0, 1, 0, 1)


# ------------------------------------------------------------------ perspective of the env


def test_observation_and_reward_are_the_movers(env, step_fn):
    """Ply t's observation shows the mover's pieces in channel 0; its reward is the mover's
    (+1 for the winning move, 0 for every other ply); the seat alternates."""
    obs, state = env.reset(jax.random.PRNGKey(3))
    moves = (0, 1, 0, 1, 0, 1, 0)  # A wins vertically at ply 6
    mine, theirs = set(), set()  # (row, col) of the mover's and the opponent's pieces
    for t, m in enumerate(moves):
        o = np.asarray(obs)
        assert {tuple(x) for x in np.argwhere(o[..., 0] > 0)} == mine
        assert {tuple(x) for x in np.argwhere(o[..., 1] > 0)} == theirs
        assert int(env.player_to_move(state)) == t % 2
        obs, state, reward, terminated, truncated, info = step_fn(jax.random.PRNGKey(t),
                                                                  state, jnp.int32(m))
        final = np.asarray(info["final_observation"])
        placed = {tuple(x) for x in np.argwhere(final[..., 1] > 0)} - mine
        assert len(placed) == 1 and list(placed)[0][1] == m  # the mover's piece, its column
        mine, theirs = theirs, mine | placed  # the next observation is the opponent's view
        assert float(reward) == (1.0 if t == len(moves) - 1 else 0.0)
        assert bool(terminated) == (t == len(moves) - 1) and not bool(truncated)
    # auto-reset: the returned observation is a fresh board, the final one is kept in info
    assert np.all(np.asarray(obs) == 0) and np.asarray(final).sum() == len(moves)


# --------------------------------------------------------------------- value targets


def test_a_two_ply_game_through_the_target_code():
    """Ply 0 (A, reward 0), ply 1 (B wins, reward 1, terminated), then the next game's ply 0
    runs into the write head. With gamma 1 (discount -1): A's target is -1, B's +1, and the
    next game's target is its own bootstrap (minus the next state's value), nothing of the
    game before."""
    K, n = 2, 3
    reward = np.array([[0.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
    terminated = np.array([[False, True, False, False, False]])
    truncated = np.zeros_like(terminated)
    valid = np.array([[True, True, True, False, False]])  # the write head after step 2
    next_values = np.array([[50.0, 60.0, 0.25, 80.0, 90.0]], np.float32)  # v(s_{t+1}), s_{t+1}'s mover's
    z = np.asarray(muzero.unroll_value_targets(reward, next_values, terminated, truncated,
                                               valid, K, n, -1.0))
    np.testing.assert_allclose(z[0], [-1.0, 1.0, -0.25])
    alive, absorbing = muzero.unroll_masks(terminated, truncated, valid, K)
    np.testing.assert_array_equal(np.asarray(alive)[0], [True, True, False])
    np.testing.assert_array_equal(np.asarray(absorbing)[0], [False, False, True])
    # the stored search values give the same targets
    root_value = np.array([[0.0, 0.0, 0.0, 0.25, 0.0, 0.0]], np.float32)
    pad = lambda x, v=False: np.concatenate([x, np.full((1, 1), v, x.dtype)], 1)  # noqa: E731
    z_search = np.asarray(muzero.search_value_targets(
        pad(reward), root_value, pad(terminated), pad(truncated), pad(valid), K, n, -1.0))
    np.testing.assert_allclose(z_search[0, :2], [-1.0, 1.0])


_COLLECTORS: dict = {}  # (id(env), steps, num_envs) -> the agent and its compiled collection


def collect_games(env, steps, num_envs=4, seed=0):
    """Real self-play collection (`agent.collect`, untrained AlphaZero, 4 simulations) for
    `steps` iterations of `num_envs` envs; returns the agent and the replay rows. One
    compiled program per env, `steps` and `num_envs` (the seed is an argument)."""
    cache_key = (id(env), steps, num_envs)
    if cache_key not in _COLLECTORS:
        agent, state = alphazero(env, num_simulations=4, num_envs=num_envs)

        def run(state, init_key, key):
            env_state = muzero_agent.init_env_state(init_key, jnp.arange(num_envs), env=env,
                                                    capacity=steps)

            def body(env_state, key):
                env_state, _ = muzero_agent.collect(state, env_state, key, env=env,
                                                    config=agent.config, search=agent.search,
                                                    axis_name=None)
                return env_state, None

            env_state, _ = jax.lax.scan(body, env_state, jax.random.split(key, steps))
            return env_state.replay

        _COLLECTORS[cache_key] = (env, agent, state, jax.jit(run))
    _, agent, state, run = _COLLECTORS[cache_key]
    return agent, state, run(state, jax.random.PRNGKey(seed), jax.random.PRNGKey(seed + 1))


@pytest.mark.slow
def test_replay_rows_align_observation_with_its_own_ply(env):
    """Row t: the observation the mover saw at t, the legal moves of that observation, an
    action among them, the reward and flags of that ply, and the next observation the env
    gave; row t+1 starts from that next observation, or from an empty board after a game end
    (auto-reset)."""
    steps = 60
    _, _, buffer = collect_games(env, steps)
    data = jax.tree.map(np.asarray, buffer.replay.data)
    games_ended = 0
    for e in range(data["obs"].shape[0]):
        pieces = 0
        for t in range(steps):
            obs, nxt = data["obs"][e, t], data["next_obs"][e, t]
            assert obs.sum() == pieces  # t-th ply of its game: as many pieces as plies
            full = obs.sum(-1)[0] > 0  # the top row: a full column is not legal
            np.testing.assert_array_equal(data["legal"][e, t], ~full)
            a = data["action"][e, t]
            assert data["legal"][e, t, a]
            assert np.all(data["policy"][e, t][~data["legal"][e, t]] == 0)
            # next observation: the opponent's view, one more piece (the mover's) in column a
            np.testing.assert_array_equal(nxt[..., 1].sum() - obs[..., 0].sum(), 1)
            np.testing.assert_array_equal(nxt[..., 0], obs[..., 1])
            assert (nxt[..., 1] - obs[..., 0])[:, a].sum() == 1
            done = data["terminated"][e, t] | data["truncated"][e, t]
            assert data["reward"][e, t] == (1.0 if data["terminated"][e, t] and
                                            _four_in_a_row(nxt[..., 1]) else 0.0)
            if t + 1 < steps:
                if done:
                    assert data["obs"][e, t + 1].sum() == 0
                else:
                    np.testing.assert_array_equal(data["obs"][e, t + 1], nxt)
            pieces = 0 if done else pieces + 1
            games_ended += int(done)
    assert games_ended >= 4  # several auto-resets exercised


def _four_in_a_row(board: np.ndarray) -> bool:
    """Whether a 6x7 0/1 board holds four in a row (any direction)."""
    rows, cols = board.shape
    for r in range(rows):
        for c in range(cols):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= y < rows and 0 <= x < cols and board[y, x] for y, x in cells):
                    return True
    return False


def test_value_targets_of_a_finished_game_are_its_result_for_each_ply(env):
    """Replay sequences through the learner's target code (gamma 1, n 42, discount -1): every
    ply of a finished game gets the game's result for its mover (+1 the winner's plies, -1
    the loser's, 0 in a draw), no target crosses into the next game, and only windows that
    reach the write head bootstrap (from the value of the state reached, the next mover's)."""
    steps = 60
    agent, _, buffer = collect_games(env, steps, seed=2)
    config = agent.config
    assert config.gamma == 1.0 and config.n_step >= env.spec.max_episode_steps
    K, n = config.unroll_steps, config.n_step
    num_envs = buffer.replay.position.shape[0]
    starts = replay.Index(jnp.repeat(jnp.arange(num_envs), steps),
                          jnp.tile(jnp.arange(steps), num_envs))
    data, valid = replay.gather_sequences(buffer.replay, starts, config.sequence_length)
    batch = muzero.Batch.from_rows(data, valid, jnp.ones(starts.env.shape[0]))
    sentinel = 100.0  # any bootstrapped value shows up as +-100
    z = np.asarray(muzero.bootstrapped_value_targets(
        batch, lambda obs: jnp.full(obs.shape[0], sentinel), K, n, -1.0))
    rows = jax.tree.map(np.asarray, buffer.replay.data)
    checked = 0
    for e in range(num_envs):
        t0 = 0  # first ply of the current game
        for t in range(steps):
            if not (rows["terminated"][e, t] or rows["truncated"][e, t]):
                continue
            last_mover_result = rows["reward"][e, t]  # +1 won, 0 draw
            for ply in range(t0, t + 1):
                same_side = (t - ply) % 2 == 0
                expected = last_mover_result if same_side else -last_mover_result
                assert z[e * steps + ply, 0] == expected, (e, ply, t)
                checked += 1
            t0 = t + 1
        for ply in range(t0, steps):  # the unfinished game: bootstraps at the write head
            same_side = (steps - 1 - ply) % 2 == 0
            # the last stored ply's next state belongs to the opponent of its mover
            assert z[e * steps + ply, 0] == (-sentinel if same_side else sentinel)
    assert checked >= 30


# ------------------------------------------------------------------------ the search


def test_mctx_backs_up_values_with_discount_minus_one(env, step_fn, shipped):
    """The env model's tree step: reward of the mover, discount -1 for a move that does not
    end the game, 0 (and value 0) for one that does; a child's Q is r - v(child) with v the
    value for the side to move there."""
    agent, state = shipped
    tree_step = jax.jit(agent.recurrent_fn)
    _, before_win, _, _ = play_moves(env, step_fn, WIN_IN_ONE)
    node = muzero.TreeNode.root(stack([before_win, before_win]), 2)
    out, child = tree_step(state.params, jax.random.PRNGKey(0), jnp.array([0, 6], jnp.int32),
                           node)
    np.testing.assert_allclose(np.asarray(out.reward), [1.0, 0.0])
    np.testing.assert_allclose(np.asarray(out.discount), [0.0, -1.0])
    assert float(out.value[0]) == 0.0 and np.asarray(child.ended).tolist() == [True, False]
    # below the end: no reward, discount 1, the end value kept (revisits change nothing)
    out2, _ = tree_step(state.params, jax.random.PRNGKey(1), jnp.array([3, 3], jnp.int32),
                        child)
    assert float(out2.reward[0]) == 0.0 and float(out2.discount[0]) == 1.0
    assert float(out2.value[0]) == 0.0


_SEARCHES: dict = {}  # (id(agent), simulations) -> the compiled search of `search_tree`


def search_tree(agent, state, env, positions, simulations, key=0):
    """mctx's Gumbel search as `run_search` runs it (greedy), returning the whole tree;
    compiled once per agent and number of simulations."""
    cache_key = (id(agent), simulations)
    if cache_key not in _SEARCHES:
        def search(params, env_state, key):
            obs = jax.vmap(observation)(env_state)
            legal = legal_actions(env, env_state)
            latent = agent.network.apply(params, obs, method=muzero.MuZeroNetwork.represent)
            logits, value, _ = muzero.predict_scalar(
                agent.network, muzero.supports(agent.config)[0], params, latent)
            root = mctx.RootFnOutput(prior_logits=logits, value=value,
                                     embedding=muzero.TreeNode.root(env_state, obs.shape[0]))
            return mctx.gumbel_muzero_policy(
                params, key, root, agent.recurrent_fn, simulations,
                invalid_actions=~legal, max_num_considered_actions=7, gumbel_scale=0.0,
                qtransform=muzero.gumbel_qtransform(agent.config.q_range,
                                                    agent.config.value_scale))

        _SEARCHES[cache_key] = (agent, jax.jit(search))  # the agent kept alive with its id
    return _SEARCHES[cache_key][1](state.params, stack(positions), jax.random.PRNGKey(key))


@pytest.mark.slow
def test_search_takes_a_win_in_one_and_values_it_plus_one(env, step_fn, shipped,
                                                           greedy_search):
    """An untrained net: the tree alone proves the win (Q = +1) and greedy search plays it,
    at the shipped number of simulations; the policy target puts most weight on it."""
    agent, state = shipped
    _, position, _, _ = play_moves(env, step_fn, WIN_IN_ONE)
    out = greedy_search(state.params, stack([position]))
    assert int(out.action[0]) == 0
    assert float(out.policy[0, 0]) > 0.5
    tree = search_tree(agent, state, env, [position], agent.config.num_simulations).search_tree
    assert float(tree.qvalues(jnp.array([0]))[0, 0]) == 1.0


DEEP = 256  # simulations enough to look two plies deep


def test_search_blocks_a_forced_loss(env, step_fn, shipped):
    """B to move, A threatens four in column 0: every move but 0 loses at the next ply. With
    an untrained net and enough simulations to look two plies deep, the search blocks, and
    the Q of the losing moves is below the block's."""
    agent, state = shipped
    _, position, _, _ = play_moves(env, step_fn, FORCED_BLOCK)
    out = search_tree(agent, state, env, [position], DEEP)
    q = np.asarray(out.search_tree.qvalues(jnp.array([0]))[0])
    assert int(out.action[0]) == 0, q
    assert q[0] > q[1:].max()


def test_illegal_moves_get_no_prior_and_no_visit_at_any_node(env, step_fn, shipped):
    """Column 0 full (it stays full below the root): neither the root nor any interior node
    that is not past a game end visits it, and the policy target gives it 0."""
    agent, state = shipped
    moves = (0, 0, 0, 0, 0, 0, 1)  # column 0 full, no four in a row
    _, position, _, ended = play_moves(env, step_fn, moves)
    assert not any(ended)
    out = search_tree(agent, state, env, [position], DEEP)  # the block test's program
    tree = out.search_tree
    assert float(out.action_weights[0, 0]) == 0.0 and int(out.action[0]) != 0
    expanded = np.asarray(tree.node_visits[0]) > 0
    live = expanded & ~np.asarray(tree.embeddings.ended[0])
    assert live.sum() > 20
    assert np.all(np.asarray(tree.children_visits[0])[live, 0] == 0)
    assert np.all(np.asarray(tree.children_prior_logits[0])[live, 0] <= muzero.NO_PRIOR / 2)


def test_policy_target_is_gumbels_improved_policy_and_self_play_temperature(env, step_fn,
                                                                            shipped):
    """The stored policy is mctx's improved policy softmax(prior logits + sigma(completed Q))
    (no noise in it), over legal moves; self-play acts with the config's temperature (the
    gumbel scale), evaluation greedily (the same move whatever the key)."""
    agent, state = shipped
    _, position, _, _ = play_moves(env, step_fn, FORCED_BLOCK)
    out = search_tree(agent, state, env, [position], agent.config.num_simulations)
    tree = out.search_tree
    qtransform = muzero.gumbel_qtransform(agent.config.q_range, agent.config.value_scale)
    completed = jax.vmap(qtransform, in_axes=(0, None))(
        tree, tree.ROOT_INDEX)
    # the root's prior logits as mctx keeps them (illegal moves masked out)
    root_logits = jnp.where(tree.root_invalid_actions[0] > 0, -jnp.inf,
                            tree.children_prior_logits[0, tree.ROOT_INDEX])
    improved = jax.nn.softmax(root_logits + completed[0])
    np.testing.assert_allclose(np.asarray(out.action_weights[0]), np.asarray(improved),
                               atol=1e-5)
    config = agent.config
    for progress in (0.0, 0.5, 0.99):
        assert float(muzero.temperature_at(config, jnp.float32(progress))) == \
            config.temperatures[0]
    obs = observation(position)[None]
    act = jax.jit(lambda params, obs, key, positions: agent.act(
        params, obs, key, greedy=True, env_state=positions))
    actions = {int(act(state.params, obs, jax.random.PRNGKey(k), stack([position]))[0])
               for k in range(4)}
    assert len(actions) == 1


# --------------------------------------------------------------- opponents and the arena


def always(column):
    """A scripted player: always `column`."""
    def policy(params, obs, key, legal=None, env_state=None):
        return jnp.full(obs.shape[0], column, jnp.int32)
    return policy


def test_arena_seats_and_signs_against_a_scripted_opponent(env):
    """Column 0 forever against column 1 forever: whoever opens wins at ply 7. The agent opens
    the even games (wins, +1) and answers in the odd ones (loses, -1)."""
    results, lengths = jax.jit(lambda k: two_player.play_episodes(
        env, always(0), None, always(1), None, k, jnp.arange(6)))(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(results), [1, -1, 1, -1, 1, -1])
    np.testing.assert_array_equal(np.asarray(lengths), [7] * 6)
    outcomes = arena.Outcomes.from_results(np.asarray(results)[0::2])
    assert (outcomes.wins, outcomes.losses, outcomes.score) == (3, 0, 1.0)


@pytest.mark.slow
def test_mcts_opponent_takes_the_win_and_blocks(env, step_fn):
    """The `mcts:N` opponent on the hand-built positions: it plays the win in one and the only
    block."""
    policy = arena.mcts_player(env, 200)
    positions = [play_moves(env, step_fn, WIN_IN_ONE)[1], play_moves(env, step_fn,
                                                                     FORCED_BLOCK)[1]]
    batch = stack(positions)
    obs = jax.vmap(observation)(batch)
    actions = jax.jit(policy)(None, obs, jax.random.PRNGKey(0),
                              legal_actions(env, batch), batch)
    np.testing.assert_array_equal(np.asarray(actions), [0, 0])


# ------------------------------------------------------- the shipped pgx self-play settings


def test_pgx_search_scales_q_by_its_fixed_range_not_per_node():
    """Outcomes are +-1, so the pgx entry divides Q by its fixed range (2) rather than
    rescaling each node's Q-values to [0, 1] by their min and max, which stretches the tiny
    Q gaps of an untrained or noisy net into full-strength policy targets (issue 50)."""
    config = muzero.default_config(GAME)
    assert config.value_max == 1.0 and config.q_range == 2.0


def test_pgx_replay_reuse_is_bounded():
    """Each stored step is trained on at most 12 times as an unroll position (the old entry:
    48, which overfit the value head to its replay; issue 50), from uniform replay."""
    config = muzero.default_config(GAME)
    assert config.replay_reuse <= 12
    assert config.priority_alpha == 0.0


def test_value_scale_weighs_a_proven_win_against_a_confident_prior(env, step_fn, shipped,
                                                                    greedy_search):
    """A win in one (Q = +1, proven by the tree) against a prior 10 logits surer of another
    move. Gumbel's bonus for the win is (50 + visits) x value_scale / q_range logits per unit
    of Q: with the Gumbel MuZero paper's 1.0 the search plays the win and its policy target
    moves onto it; with mctx's 0.1, which `pgx:*` ships, it is about 3 logits and the prior
    wins. Trained with 1.0, AlphaZero was measured weaker against `mcts:400` (0.20 and 0.025
    at 1M and 2M steps, against 0.45 and 0.10; issue 50, results/connect_four_curve.md): at 32
    simulations a move's Q has 1-4 visits, too few to decide the policy targets."""
    agent, state = shipped
    assert agent.config.value_scale == 0.1
    head = state.params["params"]["policy_head"]["Dense_0"]
    confident = {"params": {**state.params["params"], "policy_head": {"Dense_0": {
        **head, "bias": head["bias"].at[3].add(10.0)}}}}
    _, position, _, _ = play_moves(env, step_fn, WIN_IN_ONE)
    positions = stack([position])
    assert int(greedy_search(confident, positions).action[0]) == 3  # the win test's program
    scaled, _ = alphazero(env, value_scale=1.0)
    out = jax.jit(lambda params, s: scaled.search(
        params, jax.vmap(observation)(s), legal_actions(env, s), jax.random.PRNGKey(0), 1.0,
        True, s))(confident, positions)
    assert int(out.action[0]) == 0
    assert float(out.policy[0, 0]) > 0.5


# ------------------------------------------------------------------ mirror images of a board


@pytest.mark.slow
@pytest.mark.parametrize("game", ["pgx:connect_four", "pgx:tic_tac_toe"])
def test_a_games_declared_mirror_image_is_the_same_game(game):
    """Random games and their mirror images (every move m played as A-1-m) side by side:
    at every ply the observations are each other's reversal along `mirror_axes`, the legal
    moves each other's reversal, and rewards and ends equal. This is what makes a mirrored
    replay row (`mirrored_rows`) a true sample."""
    env = envs.make(game)
    axes = env.spec.mirror_axes
    num_actions = env.spec.action_space.n
    assert axes
    games, plies = 16, env.spec.max_episode_steps

    def play(key):
        obs, state = env.reset(key)
        mirror_obs, mirror_state = obs, state

        def ply(carry, k):
            obs, state, mirror_obs, mirror_state = carry
            legal = env.legal_actions(state)
            move = muzero_agent.random_legal_actions(k, legal[None])[0]
            mirror_legal = env.legal_actions(mirror_state)
            obs, state, reward, term, trunc, _ = env.step(k, state, move)
            mirror_obs, mirror_state, mirror_reward, mirror_term, mirror_trunc, _ = env.step(
                k, mirror_state, num_actions - 1 - move)
            same = (jnp.array_equal(jnp.flip(obs, axes), mirror_obs)
                    & jnp.array_equal(jnp.flip(legal), mirror_legal)
                    & (reward == mirror_reward) & (term == mirror_term)
                    & (trunc == mirror_trunc))
            return (obs, state, mirror_obs, mirror_state), (same, term)

        _, (same, ended) = jax.lax.scan(ply, (obs, state, mirror_obs, mirror_state),
                                        jax.random.split(key, plies))
        return same, ended

    same, ended = jax.jit(jax.vmap(play))(jax.random.split(jax.random.PRNGKey(0), games))
    assert bool(jnp.all(same))
    assert int(ended.sum()) >= games  # the games ran to their ends (and auto-reset)


def test_mirrored_rows_reverse_the_odd_rows_only():
    """Odd rows of a sampled batch become their mirror images (observations reversed along
    the declared axes, moves m -> A-1-m, policies and legal masks reversed); even rows and
    everything a mirror leaves alone (rewards, ends, validity, weights) are untouched, and
    mirroring twice gives the batch back."""
    rows, length, num_actions = 4, 3, 7
    rng = np.random.default_rng(0)
    obs = jnp.asarray(rng.normal(size=(rows, length, 6, 7, 2)), jnp.float32)
    batch = muzero.Batch(
        obs=obs, action=jnp.asarray(rng.integers(0, num_actions, (rows, length)), jnp.int32),
        reward=jnp.asarray(rng.normal(size=(rows, length)), jnp.float32),
        terminated=jnp.zeros((rows, length), bool), truncated=jnp.zeros((rows, length), bool),
        next_obs=obs + 1.0, valid=jnp.ones((rows, length), bool), weights=jnp.ones(rows),
        policy=jax.nn.softmax(jnp.asarray(rng.normal(size=(rows, length, num_actions)))),
        legal=jnp.asarray(rng.random((rows, length, num_actions)) < 0.5),
        root_value=jnp.asarray(rng.normal(size=(rows, length)), jnp.float32))
    mirrored = muzero.mirrored_rows(batch, (1,))
    for row in range(rows):
        flip = row % 2 == 1
        expect = lambda x, f: np.asarray(f(x[row]) if flip else x[row])  # noqa: E731
        np.testing.assert_array_equal(mirrored.obs[row],
                                      expect(batch.obs, lambda x: x[:, :, ::-1]))
        np.testing.assert_array_equal(mirrored.next_obs[row],
                                      expect(batch.next_obs, lambda x: x[:, :, ::-1]))
        np.testing.assert_array_equal(mirrored.action[row],
                                      expect(batch.action, lambda a: num_actions - 1 - a))
        np.testing.assert_array_equal(mirrored.policy[row],
                                      expect(batch.policy, lambda p: p[:, ::-1]))
        np.testing.assert_array_equal(mirrored.legal[row],
                                      expect(batch.legal, lambda m: m[:, ::-1]))
    for name in ("reward", "terminated", "truncated", "valid", "weights", "root_value"):
        np.testing.assert_array_equal(getattr(mirrored, name), getattr(batch, name))
    twice = muzero.mirrored_rows(mirrored, (1,))
    jax.tree.map(np.testing.assert_array_equal, twice, batch)


def test_mirror_augment_is_refused_for_a_game_without_a_mirror_image():
    """A game that declares no mirror image (CartPole here) gets a one-line config error."""
    config = dataclasses.replace(muzero.default_config("CartPole-v1"), mirror_augment=True)
    with pytest.raises(ConfigError, match="mirror_augment needs a game with a declared mirror image"):
        muzero.make(envs.make("CartPole-v1"), config, axis_name=None)


@pytest.mark.slow
def test_mirror_augment_trains_on_the_mirrored_batch(env):
    """The agent with `mirror_augment` takes the same learner step on a sampled batch as the
    agent without it takes on `mirrored_rows` of that batch: the augmentation sits between
    sampling and the gradient, and nothing else changes."""
    plain, state = alphazero(env, mirror_augment=False)
    mirrored_agent, _ = alphazero(env)  # connect four's shipped entry mirrors
    assert mirrored_agent.config.mirror_augment
    rows, length = 4, plain.config.sequence_length
    num_actions = env.spec.action_space.n
    keys = jax.random.split(jax.random.PRNGKey(3), 5)
    batch = muzero.Batch(
        obs=jax.random.bernoulli(keys[0], 0.3, (rows, length, *env.spec.obs_shape)).astype(
            jnp.float32),
        action=jax.random.randint(keys[1], (rows, length), 0, num_actions),
        reward=jnp.zeros((rows, length)).at[:, 9].set(1.0),
        terminated=jnp.zeros((rows, length), bool).at[:, 9].set(True),
        truncated=jnp.zeros((rows, length), bool),
        next_obs=jax.random.bernoulli(keys[2], 0.3, (rows, length, *env.spec.obs_shape)).astype(
            jnp.float32),
        policy=jax.nn.softmax(jax.random.normal(keys[3], (rows, length, num_actions))),
        legal=jnp.ones((rows, length, num_actions), bool), valid=jnp.ones((rows, length), bool),
        weights=jnp.ones(rows), root_value=jax.random.uniform(keys[4], (rows, length)))
    key = jax.random.PRNGKey(4)
    with_augment = jax.jit(mirrored_agent.update)(state, batch, key)
    by_hand = jax.jit(plain.update)(state, muzero.mirrored_rows(batch, env.spec.mirror_axes), key)
    without = jax.jit(plain.update)(state, batch, key)
    jax.tree.map(np.testing.assert_array_equal, with_augment, by_hand)
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), with_augment[0].params,
                           without[0].params)
    assert any(jax.tree.leaves(changed))
