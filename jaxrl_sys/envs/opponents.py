"""Opponents for evaluating a self-play board-game agent, by name: `random` (uniformly random
legal moves), `mcts:N` (pure Monte-Carlo tree search with N simulations, any pure-JAX game)
and `perfect` (where the game has a perfect player, as tic-tac-toe does).

Training's greedy evaluation of a two-player game plays the agent against one of them, in
both seats (`core.evaluation.evaluate`); greedy self-play would repeat one game.
"""

from __future__ import annotations

import importlib
from typing import Any

from jaxrl_sys.core import two_player
from jaxrl_sys.core.types import Env
from jaxrl_sys.envs.errors import EnvParamError

DEFAULT_OPPONENT = "random"
MCTS_PREFIX = "mcts:"
PERFECT_PLAYERS = {"TicTacToe-v0": "jaxrl_sys.envs.tictactoe:perfect_player"}


class AgainstOpponent:
    """A two-player game with the opponent its evaluation plays in the other seat: the game
    itself (states, steps and rules unchanged, every attribute forwarded) plus
    `eval_opponent`, a policy `eval_opponent(params, obs, key, legal=, env_state=)`, and its
    name (not `opponent`, which tic-tac-toe's own env uses for its fixed training opponent)."""

    def __init__(self, game: Env, opponent: two_player.Policy, opponent_name: str) -> None:
        self.game = game
        self.spec = game.spec
        self.eval_opponent = opponent
        self.opponent_name = opponent_name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.game, name)

    def __repr__(self) -> str:
        return f"AgainstOpponent({self.game!r}, {self.opponent_name!r})"


def check_opponent(env_name: str, opponent: str, players: int) -> None:
    """EnvParamError (one line) unless `opponent` names an opponent of env `env_name`, a game
    of `players` players."""
    if players != 2:
        raise EnvParamError(f"an evaluation opponent needs a two-player game; {env_name} has "
                            f"{players} player(s)")
    if opponent.startswith(MCTS_PREFIX):
        count = opponent[len(MCTS_PREFIX):]
        if not count.isdigit() or int(count) < 1:
            raise EnvParamError(f"opponent mcts:N needs N >= 1 simulations, got {opponent!r}")
    elif opponent == "perfect":
        if env_name not in PERFECT_PLAYERS:
            raise EnvParamError(f"no perfect player for {env_name} (only "
                                f"{', '.join(PERFECT_PLAYERS)})")
    elif opponent != "random":
        raise EnvParamError(f"unknown opponent {opponent!r}: random, perfect or mcts:N")


def opponent_policy(env_name: str, game: Env, opponent: str) -> two_player.Policy:
    """The policy of the opponent named `opponent` for `game` (env `env_name`, self-play)."""
    check_opponent(env_name, opponent, game.spec.num_players)
    if opponent == "random":
        return two_player.random_player
    if opponent.startswith(MCTS_PREFIX):
        return two_player.mcts_player(game, int(opponent[len(MCTS_PREFIX):]))
    module, attr = PERFECT_PLAYERS[env_name].split(":")
    return getattr(importlib.import_module(module), attr)(game)


def against(env_name: str, game: Env, opponent: str) -> AgainstOpponent:
    """`game` with the named opponent attached for evaluation."""
    return AgainstOpponent(game, opponent_policy(env_name, game, opponent), opponent)
