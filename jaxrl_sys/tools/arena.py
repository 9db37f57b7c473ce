"""Two-player games between two policies, on device: the judge of board-game agents.

A policy here has the evaluation signature `policy(params, obs, key, legal=, env_state=)`
over a batch of games (every agent's `greedy_action` has it). Games run in a two-player
self-play env (`spec.num_players == 2`, `player_to_move(state)` 0 for the opening seat,
reward for the side that just moved); half of the games open with each player.

The games and the opponents that need no training (a uniformly random player, a pure
Monte-Carlo tree search) are core's (`jaxrl_sys.core.two_player`), since training evaluates
against them too; this module scores them.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from jaxrl_sys.core.two_player import (  # noqa: F401  (the arena's players and referee)
    ROLLOUTS_PER_NODE, Policy, check_game, mcts_player, play, random_player,
)


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """Results of one player over a set of games."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """Win 1, draw 0.5, loss 0, averaged over games."""
        return (self.wins + 0.5 * self.draws) / max(self.games, 1)

    @classmethod
    def from_results(cls, results) -> "Outcomes":
        """From per-game results (+1 win, 0 draw, -1 loss)."""
        results = jnp.asarray(results)
        return cls(int(jnp.sum(results > 0)), int(jnp.sum(results == 0)),
                   int(jnp.sum(results < 0)))

    def as_dict(self) -> dict[str, int]:
        return {"wins": self.wins, "draws": self.draws, "losses": self.losses,
                "games": self.games}


