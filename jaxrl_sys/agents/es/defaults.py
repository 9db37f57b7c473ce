"""ES's and ARS's shipped per-env configs, as data: what each tuned env (or family) changes
from `Config`'s defaults, and what that reached."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_sys.agents.es.config import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

# the families' sizes: an episode limit and a budget of the right size
_FAMILIES: dict[str, dict[str, Any]] = {
    "*-MinAtar": dict(total_steps=50_000_000, rollout_steps=1000, hidden=(64, 64),
                      population=256),
    "brax:*": dict(total_steps=50_000_000, rollout_steps=1000, population=256,
                   normalize_obs=True),
    "*-bsuite": dict(total_steps=5_000_000, rollout_steps=1000),
    "*-popgym": dict(total_steps=10_000_000, rollout_steps=1000),
}

# ES's and ARS's entries for those families (the same sizes for both strategies)
_FAMILY_ENTRIES: tuple[Tuned, ...] = tuple(
    Tuned(env, overrides, f"{NOT_MEASURED}: a budget and episode limit for the family")
    for env, overrides in _FAMILIES.items())

TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", {},
          "16/16 seeds reach 475 at 1M steps under native and AVX, greedy 500.0 mean final "
          "(results/check_learning_issue53.md)"),
    # Pendulum's return is noisy per start angle: twice the members average it out, a wider
    # policy, and a rate annealed to 0 so that the last generations settle the mean; each
    # member steps only its 200-step episode (the env's limit), not the class's 500
    Tuned("Pendulum-v1", dict(population=128, total_steps=24_064_000, anneal_lr=True,
                              hidden=(64, 64), rollout_steps=200),
          "the 940 generations of the 60M-step entry with 500-step rollouts, the same means "
          "bit for bit (tests/test_es.py): greedy -169.2 mean final over 16 seeds, 2 ending "
          "below -210 (Xeon; AVX -159.7, none); 2,350 generations in 60M steps: -160.2 "
          "natively, but AVX -194.3 with one seed at -736.7 (docs/notes/es.md)"),
    *_FAMILY_ENTRIES,
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, overrides=(("total_steps", 1_000_000),), chunks=10,
                    note="1M of the shipped 2M steps"),
)

# ARS V2-t (Mania et al. 2018): a linear policy on standardised observations, plain SGD
# steps along the top directions scaled by their returns' standard deviation
ARS: dict[str, Any] = dict(strategy="ars", hidden=(), normalize_obs=True, optimizer="sgd",
                           population=32, top_fraction=0.5, noise_std=0.03,
                           learning_rate=0.02)
ARS_TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", {},
          "16/16 seeds reach 475 at 500k steps under native and AVX "
          "(results/check_learning_issue53.md)"),
    *_FAMILY_ENTRIES,
)
ARS_PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0, overrides=(("total_steps", 500_000),), chunks=10,
                    note="500k of the shipped 2M steps"),
)


def default_config(env_name: str) -> Config:
    """The ES config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)


def ars_config(env_name: str) -> Config:
    """ARS's config for `env_name`: `ARS` over `Config`'s defaults, then its tuned entry."""
    return tuned_config(dataclasses.replace(Config(), **ARS), ARS_TUNED, env_name)
