"""Play a trained board-game agent against an opponent: `python scripts/arena.py RUN_DIR
--opponent perfect --games 200`.

Rebuilds the run's agent from the flags it was started with, restores its latest checkpoint
(or `--chunk N`) and plays `--games` greedy games of its first seed on device, half of them
opening, half answering. Opponents: `random`, `perfect` (tic-tac-toe), `mcts:N` (pure Monte-
Carlo tree search with random rollouts and N simulations, any game) or another RUN_DIR of
the same game. Prints a table; with `--json` its last line is one JSON object
`{"wins": W, "draws": D, "losses": L, "games": G}`. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import train  # noqa: E402  (the run's flags and agent set-up are train.py's)

PERFECT_PLAYERS = {"TicTacToe-v0": "envs.tictactoe:perfect_player"}


def build_parser() -> argparse.ArgumentParser:
    p = train._Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory of a two-player game (scripts/train.py)")
    p.add_argument("--opponent", default="random",
                   help="random, perfect, mcts:N or another run directory")
    p.add_argument("--games", type=int, default=200, help="games, split evenly over both seats")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the games")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    return p


def check_args(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything is built."""
    if args.games < 2 or args.games % 2:
        raise train.UsageError(f"--games must be an even number >= 2, got {args.games}")
    if args.opponent.startswith("mcts:"):
        count = args.opponent[len("mcts:"):]
        if not count.isdigit() or int(count) < 1:
            raise train.UsageError(f"--opponent mcts:N needs N >= 1 simulations, got "
                                   f"{args.opponent!r}")
    elif args.opponent not in ("random", "perfect") and not Path(args.opponent).is_dir():
        raise train.UsageError(f"unknown opponent {args.opponent!r}: random, perfect, mcts:N "
                               "or a run directory")


def game_setup(run_dir: str):
    """(run args, agent setup) of a saved run of a two-player game; nothing is restored."""
    run_args = train.resumed_args(argparse.Namespace(resume=run_dir, no_progress=True))
    setup = train.build_agent(run_args)
    if setup.host or setup.env.spec.num_players != 2:
        raise train.UsageError(f"{run_dir} is a run of {setup.env_name}, not of a two-player "
                               "game")
    return run_args, setup


def restore_state(run_dir: str, run_args, setup, chunk: Optional[int]):
    """The agent state of the run's first seed from its checkpoint (default: the latest)."""
    import jax
    import numpy as np

    from jaxrl_sys.checkpoint import Checkpointer
    from jaxrl_sys.execution import place

    runner = place(*setup.module.placement_fns(setup.agent), num_envs=setup.config.num_envs,
                   num_devices=run_args.devices)
    checkpointer = Checkpointer(run_dir, create=False)
    try:
        carry, _ = checkpointer.restore(
            runner.init(np.arange(run_args.seed, run_args.seed + run_args.seeds)), chunk)
    finally:
        checkpointer.close()
    return jax.tree.map(lambda x: x[0], carry.agent_state)


def opponent_policy(name: str, setup):
    """(policy, params or a restore function) of a named opponent for the run's game; refuses
    an opponent the game does not have before anything is restored."""
    import importlib

    from jaxrl_sys import arena

    if name == "random":
        return arena.random_player, None
    if name.startswith("mcts:"):
        return arena.mcts_player(setup.env, int(name[len("mcts:"):])), None
    if name == "perfect":
        if setup.env_name not in PERFECT_PLAYERS:
            raise train.UsageError(f"no perfect player for {setup.env_name} (only "
                                   f"{', '.join(PERFECT_PLAYERS)})")
        module, attr = PERFECT_PLAYERS[setup.env_name].split(":")
        return getattr(importlib.import_module(module), attr)(setup.env), None
    other_args, other = game_setup(name)
    if other.env_name != setup.env_name:
        raise train.UsageError(f"{name} plays {other.env_name}, not {setup.env_name}")
    policy = other.module.greedy_action(other.agent)
    return policy, lambda: restore_state(name, other_args, other, None)


def arena_run(args: argparse.Namespace) -> int:
    check_args(args)
    run_args = train.resumed_args(argparse.Namespace(resume=args.run_dir, no_progress=True))
    from jaxrl_sys.devices import enable_compile_cache, request_devices

    request_devices(run_args.devices)
    enable_compile_cache()
    import jax
    import jax.numpy as jnp

    from jaxrl_sys import arena

    run_args, setup = game_setup(args.run_dir)
    opponent, opponent_state = opponent_policy(args.opponent, setup)
    state = restore_state(args.run_dir, run_args, setup, args.chunk)
    if callable(opponent_state):
        opponent_state = opponent_state()
    policy = setup.module.greedy_action(setup.agent)
    play = jax.jit(lambda s, o, k: arena.play(setup.env, policy, s, opponent, o, k,
                                              jnp.arange(args.games)))
    results = jax.device_get(play(state, opponent_state, jax.random.PRNGKey(args.seed)))
    print(f"{run_args.agent} on {setup.env_name} ({args.run_dir}) against {args.opponent}, "
          f"{args.games} games:")
    print("| seat | wins | draws | losses |")
    print("|---|---:|---:|---:|")
    for seat, games in (("first", results[0::2]), ("second", results[1::2])):
        o = arena.Outcomes.from_results(games)
        print(f"| {seat} | {o.wins} | {o.draws} | {o.losses} |")
    total = arena.Outcomes.from_results(results)
    print(f"| all | {total.wins} | {total.draws} | {total.losses} |")
    print(f"score {total.score:.3f} (win 1, draw 0.5)")
    if args.json:
        print(json.dumps(total.as_dict()))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    from jaxrl_sys.checkpoint import CheckpointError

    from agents import UnknownAgentError
    from envs import UnknownEnvError
    from jaxrl_sys.config import ConfigError

    try:
        return arena_run(build_parser().parse_args(argv))
    except (train.UsageError, CheckpointError, UnknownEnvError, UnknownAgentError,
            ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
