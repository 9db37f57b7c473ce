"""MuZero's shipped per-env configs, as data: each entry the fields it sets and what they
reached (how they were chosen: docs/notes/muzero.md), and the learning checks they promise.
"""

from __future__ import annotations

from jaxrl_sys.agents.muzero.config import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

# Breakout-MinAtar's settings: 64 envs, 16 simulations, 10-step targets bootstrapped from the
# stored search values, two layers of 256 on the flattened frame, the model unrolled 3 steps,
# and every latent decoded back to its frame by one linear map (weight 10), so that the
# model's latents keep the board and its dynamics learn how moves change it
_MINATAR = dict(total_steps=1_000_000, num_envs=64, updates_per_iteration=4, gamma=0.99,
                n_step=10, value_max=30.0, reward_max=1.0, learning_rate=1e-3, torso="mlp",
                hidden=(256, 256), buffer_size=200_000, learning_starts=5_000,
                num_simulations=16, rule_heads=True, value_bootstrap="search", unroll_steps=3,
                reconstruction_loss_weight=10.0, decoder_hidden=())

# pgx board games: Monte-Carlo value targets (gamma 1, n covering a connect-four game), 128
# envs, one update of 256 rows per iteration from uniform replay, Q divided by its fixed
# range, four random opening plies
_PGX = dict(torso="mlp", hidden=(128, 128), latent_dim=128, rule_heads=True,
            total_steps=2_000_000, num_envs=128, updates_per_iteration=1, batch_size=256,
            gamma=1.0, n_step=42, value_max=1.0, reward_max=1.0, support_bins=21,
            num_simulations=32, learning_starts=5_000, buffer_size=100_000,
            learning_rate=2e-3, priority_alpha=0.0, q_range=2.0, opening_plies=4,
            temperatures=(1.0,), temperature_milestones=())

# bsuite's small tasks: CartPole's network
_BSUITE = dict(total_steps=200_000, q_range=10.0, hidden=(128, 128), rule_heads=True)

TUNED: tuple[Tuned, ...] = (
    Tuned(
        "CartPole-v1",
        dict(q_range=10.0, hidden=(128, 128), rule_heads=True, priority_alpha=0.0,
             gamma=0.995, value_max=200.0, learning_rate=1e-3, consistency_loss_weight=2.0),
        reached="greedy 500.0 at 150k steps on every one of seeds 0-7 natively and of seeds "
                "0-3 under AVX (docs/notes/muzero.md)",
    ),
    Tuned(
        "Breakout-MinAtar",
        _MINATAR,
        reached="greedy 42.4 at 1M steps over seeds 0-3 (57.5, 58.5, 24.5, 29.0; with a "
                "decoder of two layers: 29.2; without the reconstruction loss: 25.4; "
                "docs/notes/muzero.md, Breakout-MinAtar)",
    ),
    Tuned(
        "SpaceInvaders-MinAtar",
        dict(_MINATAR, decoder_hidden=None),
        reached="greedy 50.0 at 1M steps over seeds 0-1 (54.0, 46.0; with Breakout's linear "
                "decoder: 27.5; without the reconstruction loss: 38.5; "
                "results/muzero_spaceinvaders.md)",
    ),
    Tuned(
        "*-MinAtar",
        _MINATAR,
        reached="not measured: Breakout's settings for the other MinAtar games",
    ),
    Tuned(
        "Catch-bsuite",
        dict(_BSUITE, total_steps=30_000, unroll_steps=1, updates_per_iteration=4),
        reached="greedy 1.0 from 12k of 30k steps on every one of seeds 0-3 (the bsuite entry, "
                "K=5 and one update: -0.3 at 30k; docs/notes/muzero.md, Catch-bsuite)",
    ),
    Tuned(
        "*-bsuite",
        _BSUITE,
        reached="not measured: CartPole's network for bsuite's small tasks",
    ),
    Tuned(
        "*-popgym",
        dict(total_steps=1_000_000, hidden=(128, 128), rule_heads=True),
        reached="not measured: POPGym's tasks need memory; MuZero's model sees one observation",
    ),
    Tuned(
        "TicTacToe-v0",
        dict(total_steps=300_000, num_envs=64, updates_per_iteration=8, gamma=1.0, n_step=9,
             value_max=1.0, reward_max=1.0, support_bins=21, num_simulations=32,
             learning_starts=2_000, temperatures=(1.0,), temperature_milestones=(),
             opening_plies=4, rule_heads=True, q_range=2.0),
        reached="0 losses in 200 games against the perfect player, seeds 0 and 1 "
                "(docs/design/board-games.md)",
    ),
    Tuned(
        "pgx:*",
        _PGX,
        reached="measured on pgx:connect_four before its own entry: AlphaZero (model=env), one "
                "2M-step run (18 minutes on one "
                "core of the 2-core EPYC): score against mcts:400 at its 32 simulations 0.40 at "
                "1M steps, 0.525 at 2M (40 games each); without the random opening plies "
                "0.45 and 0.10, and trained with value_scale 1.0 0.20 and 0.025 "
                "(results/connect_four_curve.md)",
    ),
    Tuned(
        "pgx:connect_four",
        dict(_PGX, mirror_augment=True, value_target_mix=0.5, num_simulations=48,
             latent="planes", conv_channels=16, res_blocks=1),
        reached="AlphaZero (model=env), one 2M-step run (1,640 s of training on one core of "
                "the 2-core EPYC): score against mcts:400 at its 48 simulations 0.600 at 2M "
                "steps over 200 games (issue 50 asks 0.6); at 32 simulations 0.585, and "
                "0.525 without the mirror images and mixed value targets. The learned model "
                "(plane latents, conv dynamics), this entry: 0.585 against mcts:100 over 200 "
                "games at 1.2M steps (55.7 minutes of training on one core); 0.643 at 1.4M "
                "steps (57.3 minutes) of a 1.6M-step schedule "
                "(results/connect_four_curve.md)",
    ),
)


PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 400.0,
                    note="shipped defaults (150k steps); 475 at the end on every seed is the "
                         "aim. Left to the learning check (results/"
                         "check_learning_muzero_devices.md): the suite trains the learned "
                         "model on Catch, in a seventh of the time",
                    test_seeds=0),
    LearningPromise("Catch-bsuite", 0.9, chunks=10,
                    note="the learned model on bsuite's Catch (random play: about -0.6); "
                         "16 of 16 seeds at 1.0 natively and under AVX "
                         "(results/check_learning_muzero_catch.md)"),
)


def default_config(env_name: str) -> Config:
    """The MuZero config for `env_name`: shared defaults with its tuned entry's overrides (an
    env's own, else its family's, such as `pgx:*`)."""
    return tuned_config(Config(), TUNED, env_name)


# AlphaZero (the `alphazero` agent): MuZero's entries searched over the real env (`model="env"`),
# without the options that only a learned model has
LEARNED_MODEL_ONLY = frozenset({"consistency_loss_weight", "reconstruction_loss_weight",
                                "decoder_hidden", "reanalyse_fraction", "latent"})
_ALPHAZERO_REACHED: dict[str, str] = {
    "TicTacToe-v0": "0 losses in 100 games against the perfect player, 50 in each seat, at 20k "
                    "steps under native, AVX2, AVX and SSE4_2 code (tests/test_muzero.py)",
    "Breakout-MinAtar": "greedy 83.9 at 1M steps over seeds 0-3 (92.0, 73.5, 84.5, 85.5); "
                        "the search's simulated env steps not counted "
                        "(results/alphazero_minatar.md)",
    "SpaceInvaders-MinAtar": "greedy 164.0 at 1M steps over seeds 0-1 (159.0, 169.0; seeds "
                             "2-3 155.0 at 350k); the search's simulated env steps not "
                             "counted (results/alphazero_minatar.md)",
    "pgx:connect_four": "0.600 against mcts:400 at its 48 simulations over 200 games at 2M "
                        "steps, one run (results/connect_four_curve.md)",
}
ALPHAZERO_TUNED: tuple[Tuned, ...] = tuple(
    Tuned(entry.env,
          {k: v for k, v in entry.overrides.items() if k not in LEARNED_MODEL_ONLY},
          _ALPHAZERO_REACHED.get(entry.env, f"{NOT_MEASURED}: MuZero's entry, searched over "
                                            "the real env"))
    for entry in TUNED
)
ALPHAZERO_PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("Catch-bsuite", 0.9, chunks=10,
                    note="the real env in the tree, bsuite's Catch (random play: about -0.6); "
                         "16 of 16 seeds at 1.0 natively and under AVX "
                         "(results/check_learning_alphazero_catch.md)"),
)


def alphazero_config(env_name: str) -> Config:
    """AlphaZero's config for `env_name`: MuZero's entry for it, the search stepping the real
    env (`model="env"`)."""
    return tuned_config(Config(model="env"), ALPHAZERO_TUNED, env_name)
