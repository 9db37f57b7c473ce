"""Tactics of a board-game run: how often its greedy search plays a win in one, and the only
move that avoids a loss in one, on random positions classified by stepping the real game.

    python benchmarks/tactics.py RUN_DIR --chunks 0,1,3,7 [--positions 128] [--plies 12]
        [--simulations N] [--value-scale X] [--model] [--json OUT]

A fast companion to arena games against `mcts:N` (a minute per checkpoint on a CPU, where 40
games against `mcts:400` take half an hour): a sound AlphaZero gets better at both as it
trains. Positions come from `--plies` uniformly random legal moves (games that ended are
dropped); a "win in one" has at least one move that wins at once; a "forced block" has no
win in one and exactly one legal move after which the opponent cannot win at once. The
agent plays its greedy search (the run's own simulations, or `--simulations`), optionally
with Gumbel's `value_scale` replaced at play time (`--value-scale`). `--model` also asks a
learned model, without search, what reward and episode end its dynamics predict for the
winning and the other moves of the win-in-one positions. Two-player pgx games.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.commands.arena import first_seed_state, open_game_run
from jaxrl_sys.core.rollout import legal_actions
from jaxrl_sys.runtime.cli import Parser, UsageError, guarded, run_script
from jaxrl_sys.runtime.session import USER_ERRORS


def random_positions(env, key: jax.Array, games: int, plies: int):
    """(obs [G, ...], env states [G, ...], alive bool [G]) after `plies` uniformly random
    legal moves of `games` fresh games; alive is False where a game ended on the way."""
    obs, state = jax.vmap(env.reset)(jax.random.split(key, games))

    def ply(carry, step_key):
        obs, state, alive = carry
        legal = legal_actions(env, state)
        action = jax.random.categorical(step_key, jnp.where(legal, 0.0, -jnp.inf))
        obs, state, _, terminated, truncated, _ = jax.vmap(env.step)(
            jax.random.split(step_key, games), state, action)
        return (obs, state, alive & ~(terminated | truncated)), None

    carry = (obs, state, jnp.ones(games, bool))
    (obs, state, alive), _ = jax.lax.scan(ply, carry, jax.random.split(key, plies))
    return obs, state, alive


def classify(env, state, num_actions: int):
    """(winning moves bool [G, A], safe moves bool [G, A]) of a batch of positions: a winning
    move wins at once; a safe move is legal, does not lose at once, and leaves the opponent
    no move that wins at once."""
    key = jax.random.PRNGKey(0)
    legal = legal_actions(env, state)
    actions = jnp.arange(num_actions)

    def after(single_state, action):
        _, next_state, reward, terminated, truncated, _ = env.step(key, single_state, action)
        return next_state, reward, terminated | truncated

    def replies(single_state):
        next_states, reward, ended = jax.vmap(after, in_axes=(None, 0))(single_state, actions)
        reply_legal = legal_actions(env, next_states)
        _, reply_reward, _ = jax.vmap(jax.vmap(after, in_axes=(None, 0)), in_axes=(0, None))(
            next_states, actions)
        opponent_wins = jnp.any(reply_legal & (reply_reward > 0), axis=1) & ~ended
        return reward > 0, reward >= 0, opponent_wins

    wins, not_lost, opponent_wins = jax.vmap(replies)(state)
    return legal & wins, legal & not_lost & ~opponent_wins


def probe(saved, agent, agent_state, positions: int, plies: int, seed: int) -> dict:
    """Fractions of win-in-one and forced-block positions where greedy search plays a winning
    or the one safe move, with the position counts."""
    env = saved.env
    num_actions = env.spec.action_space.n
    policy = saved.resolved.module.greedy_action(agent)

    @jax.jit
    def run(agent_state, key):
        obs, state, alive = random_positions(env, key, positions * 16, plies)
        winning, safe = classify(env, state, num_actions)
        legal = legal_actions(env, state)
        action = policy(agent_state, obs.astype(jnp.float32), jax.random.PRNGKey(seed + 1),
                        legal=legal, env_state=state)
        win_in_one = alive & winning.any(axis=1)
        forced = alive & ~winning.any(axis=1) & (safe.sum(axis=1) == 1) & (legal.sum(axis=1) > 1)
        took = jnp.take_along_axis(winning, action[:, None], axis=1)[:, 0]
        blocked = jnp.take_along_axis(safe, action[:, None], axis=1)[:, 0]
        return win_in_one, forced, took, blocked

    win_in_one, forced, took, blocked = map(np.asarray, run(agent_state,
                                                             jax.random.PRNGKey(seed)))
    wins = np.flatnonzero(win_in_one)[:positions]
    blocks = np.flatnonzero(forced)[:positions]
    return {"wins_in_one": float(took[wins].mean()) if wins.size else None,
            "win_positions": int(wins.size),
            "forced_blocks": float(blocked[blocks].mean()) if blocks.size else None,
            "block_positions": int(blocks.size)}


def model_probe(saved, agent, agent_state, positions: int, plies: int, seed: int) -> dict:
    """What a learned model predicts for the moves of win-in-one positions, no search: the
    mean reward and end probability of its dynamics for winning and for other legal moves,
    and how often the move of highest predicted reward wins."""
    from jaxrl_sys.agents.muzero.networks import MuZeroNetwork, supports
    from jaxrl_sys.core.value_transform import logits_to_scalar

    env, network = saved.env, agent.network
    num_actions = env.spec.action_space.n
    _, reward_support = supports(agent.config)

    @jax.jit
    def run(params, key):
        obs, state, alive = random_positions(env, key, positions * 16, plies)
        winning, _ = classify(env, state, num_actions)
        legal = legal_actions(env, state)
        latent = network.apply(params, obs.astype(jnp.float32), method=MuZeroNetwork.represent)

        def after(action):
            _, reward_logits, end_logit = network.apply(
                params, latent, jnp.full(latent.shape[:1], action),
                method=MuZeroNetwork.dynamics)
            return logits_to_scalar(reward_logits, reward_support), jax.nn.sigmoid(end_logit)

        reward, end = (x.T for x in jax.vmap(after)(jnp.arange(num_actions)))  # [G, A]
        return alive & winning.any(axis=1), winning, legal, reward, end

    win_in_one, winning, legal, reward, end = map(np.asarray, run(agent_state.params,
                                                                  jax.random.PRNGKey(seed)))
    rows = np.flatnonzero(win_in_one)[:positions]
    winning, legal, reward, end = winning[rows], legal[rows], reward[rows], end[rows]
    others = legal & ~winning
    best = np.argmax(np.where(legal, reward, -np.inf), axis=1)
    return {"reward_of_wins": float(reward[winning].mean()),
            "reward_of_others": float(reward[others].mean()),
            "end_of_wins": float(end[winning].mean()),
            "end_of_others": float(end[others].mean()),
            "top_reward_wins": float(np.take_along_axis(winning, best[:, None], 1).mean()),
            "model_positions": int(rows.size)}


def env_steps_at(run_dir: Path, chunk: int) -> int:
    """The env steps logged at the end of `chunk`: the chunk-th distinct `env_steps` of
    metrics.jsonl, since a resumed run logs again the chunks it trained a second time."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return sorted({int(json.loads(line)["env_steps"]) for line in lines})[chunk]


def main(argv=None) -> int:
    """Parse the flags and print the table; bad input (flags, run directory, a checkpoint
    this version cannot read) is one line and exit code 2."""
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--chunks", default=None, help="comma-separated checkpoints (default: latest)")
    p.add_argument("--positions", type=int, default=128, help="positions of each kind")
    p.add_argument("--plies", type=int, default=12, help="random plies before a position")
    p.add_argument("--simulations", type=int, default=None)
    p.add_argument("--value-scale", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="write the rows to this file")
    p.add_argument("--model", action="store_true",
                   help="also probe a learned model's predictions on the win-in-one positions")
    return guarded(lambda: tabulate(p.parse_args(argv)), USER_ERRORS)


def tabulate(args: argparse.Namespace) -> int:
    """The tactics table of the run and checkpoints `args` name."""
    if not Path(args.run_dir).is_dir():
        raise UsageError(f"no run directory at {args.run_dir}")
    try:
        chunks = ([int(c) for c in args.chunks.split(",")] if args.chunks else [None])
    except ValueError:
        raise UsageError(f"--chunks takes comma-separated chunk numbers, got {args.chunks!r}")
    saved = open_game_run(args.run_dir, set_up_devices=True)
    changes = {k: v for k, v in (("num_simulations", args.simulations),
                                 ("value_scale", args.value_scale)) if v is not None}
    agent = (saved.resolved.module.make(saved.env, dataclasses.replace(saved.agent.config,
                                                                        **changes))
             if changes else saved.agent)
    if args.model and getattr(agent.config, "model", None) != "learned":
        raise UsageError("--model needs a run of MuZero's learned model")
    rows = []
    print("| chunk | env steps | wins in one | forced blocks |")
    print("|---:|---:|---:|---:|")
    for chunk in chunks:
        _, record = saved.restore(chunk)
        at = int(record["chunk"])  # the checkpoint's own chunk (the latest when None)
        agent_state = first_seed_state(saved, chunk)
        row = {"chunk": at, "env_steps": env_steps_at(Path(args.run_dir), at), **changes,
               **probe(saved, agent, agent_state, args.positions, args.plies, args.seed)}
        if args.model:
            row.update(model_probe(saved, agent, agent_state, args.positions, args.plies,
                                   args.seed))
        rows.append(row)
        print(f"| {at} | {row['env_steps']:,} | {row['wins_in_one']:.3f} "
              f"({row['win_positions']}) | {row['forced_blocks']:.3f} "
              f"({row['block_positions']}) |", flush=True)
        if args.model:
            print(f"|   | model: predicted reward of winning / other moves "
                  f"{row['reward_of_wins']:.3f} / {row['reward_of_others']:.3f}, end "
                  f"{row['end_of_wins']:.3f} / {row['end_of_others']:.3f}, top reward wins "
                  f"{row['top_reward_wins']:.3f} |   |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_script(main)
