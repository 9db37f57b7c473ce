"""Play a trained board-game agent against an opponent: `python scripts/arena.py RUN_DIR
--opponent perfect --games 200`.

Rebuilds the run's agent from the flags it was started with, restores its latest checkpoint
(or `--chunk N`) and plays `--games` greedy games of its first seed on device, half of them
opening, half answering. Opponents: `random`, `perfect` (tic-tac-toe), `mcts:N` (pure Monte-
Carlo tree search with random rollouts and N simulations, any game) or another RUN_DIR of
the same game. `--simulations N` gives a search agent (MuZero, AlphaZero) N simulations per
move instead of its training budget, as AlphaZero's evaluations searched more than its
self-play. Prints a table; with `--json` its last line is one JSON object
`{"wins": W, "draws": D, "losses": L, "games": G}`. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory of a two-player game (scripts/train.py)")
    p.add_argument("--opponent", default="random",
                   help="random, perfect, mcts:N or another run directory")
    p.add_argument("--games", type=int, default=200, help="games, split evenly over both seats")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the games")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    p.add_argument("--setting", type=int, default=None,
                   help="RUN_DIR is a sweep: play this setting (its index in sweep.md)")
    p.add_argument("--simulations", type=int, default=None,
                   help="search agents: simulations per move (default: the run's own)")
    return p


def check_args(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything is built."""
    if args.games < 2 or args.games % 2:
        raise UsageError(f"--games must be an even number >= 2, got {args.games}")
    if args.simulations is not None and args.simulations < 1:
        raise UsageError(f"--simulations must be >= 1, got {args.simulations}")
    if args.opponent.startswith("mcts:"):
        count = args.opponent[len("mcts:"):]
        if not count.isdigit() or int(count) < 1:
            raise UsageError(f"--opponent mcts:N needs N >= 1 simulations, got "
                                   f"{args.opponent!r}")
    elif args.opponent not in ("random", "perfect") and not Path(args.opponent).is_dir():
        raise UsageError(f"unknown opponent {args.opponent!r}: random, perfect, mcts:N "
                               "or a run directory")


def open_game_run(run_dir: str, set_up_devices: bool = False, setting: Optional[int] = None):
    """A saved run of a two-player game (`jaxrl_sys.runtime.session.SavedRun`, or a sweep's
    `setting`); nothing restored."""
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime import sweeps
    from jaxrl_sys.runtime.run_spec import load_spec
    from jaxrl_sys.runtime.session import open_run

    is_sweep = bool(load_spec(run_dir).sweep)
    if is_sweep != (setting is not None):
        raise UsageError(f"{run_dir} is a sweep: pick a setting with --setting N (see its "
                         "sweep.md)" if is_sweep else "--setting is for sweeps only")
    if is_sweep:
        saved = sweeps.open_setting(run_dir, setting, agents.load, envs,
                                    set_up_devices=set_up_devices)
    else:
        saved = open_run(run_dir, agents.load, envs, set_up_devices=set_up_devices)
    if saved.resolved.host or saved.env.spec.num_players != 2:
        raise UsageError(f"{run_dir} is a run of {saved.resolved.env_name}, not of a "
                         "two-player game")
    return saved


def first_seed_state(saved, chunk: Optional[int]):
    """The agent state of the run's first seed from its checkpoint (default: the latest)."""
    import jax

    carry, _ = saved.restore(chunk)
    return jax.tree.map(lambda x: x[0], carry.agent_state)


def opponent_policy(name: str, saved):
    """(policy, params or a restore function) of a named opponent for the run's game; refuses
    an opponent the game does not have before anything is restored."""
    from jaxrl_sys.envs import opponents

    if not Path(name).is_dir():
        try:
            return opponents.opponent_policy(saved.resolved.env_name, saved.env, name), None
        except opponents.EnvParamError as error:
            raise UsageError(str(error)) from None
    other = open_game_run(name)
    if other.resolved.env_name != saved.resolved.env_name:
        raise UsageError(f"{name} plays {other.resolved.env_name}, not "
                         f"{saved.resolved.env_name}")
    policy = other.resolved.module.greedy_action(other.agent)
    return policy, lambda: first_seed_state(other, None)


def searching_agent(saved, simulations: Optional[int]):
    """The run's agent, rebuilt with `simulations` per search when given (refused for an
    agent that does not search)."""
    if simulations is None:
        return saved.agent
    config = saved.agent.config
    if not hasattr(config, "num_simulations"):
        raise UsageError(f"--simulations is for search agents; {saved.resolved.spec.agent} "
                         "does not search")
    import dataclasses

    return saved.resolved.module.make(
        saved.env, dataclasses.replace(config, num_simulations=simulations))


def arena_run(args: argparse.Namespace) -> int:
    check_args(args)
    saved = open_game_run(args.run_dir, set_up_devices=True, setting=args.setting)
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.tools import arena

    opponent, opponent_state = opponent_policy(args.opponent, saved)
    state = first_seed_state(saved, args.chunk)
    if callable(opponent_state):
        opponent_state = opponent_state()
    setup = saved.resolved
    policy = setup.module.greedy_action(searching_agent(saved, args.simulations))
    play = jax.jit(lambda s, o, k: arena.play(saved.env, policy, s, opponent, o, k,
                                              jnp.arange(args.games)))
    results = jax.device_get(play(state, opponent_state, jax.random.PRNGKey(args.seed)))
    budget = "" if args.simulations is None else f", {args.simulations} simulations per move"
    print(f"{setup.spec.agent} on {setup.env_name} ({args.run_dir}{budget}) against "
          f"{args.opponent}, {args.games} games:")
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
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime.session import USER_ERRORS

    return guarded(lambda: arena_run(build_parser().parse_args(argv)),
                   USER_ERRORS + agents.USER_ERRORS + envs.USER_ERRORS)


def entry() -> None:
    """The `jaxrl-arena` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
