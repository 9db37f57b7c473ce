"""PPO's shipped per-env configs, as data: what each tuned env (or env family) changes from
`Config`'s defaults, and what that reached. How they were found: docs/notes/ppo.md."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_sys.agents.ppo.agent import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "SpaceInvaders", "Seaquest")

# gymnax-blines' published PPO settings for every MinAtar game (agents/<game>-MinAtar/ppo.yaml)
_MINATAR: dict[str, Any] = dict(
    total_steps=10_000_000, num_envs=64, rollout_steps=128, num_minibatches=8, update_epochs=4,
    gamma=0.999, learning_rate=5e-4, anneal_lr=False, ent_coef=0.01, max_grad_norm=0.5,
    hidden=(256, 256), activation="relu",
)
_MINATAR_REACHED = {
    "Asterix": "greedy 27.4 ± 7.2 over 4 seeds at 10M steps, reference 15 (results/minatar.md)",
    "Breakout": "greedy 25.7 ± 2.0 over 4 seeds at 10M steps, reference 28 (results/minatar.md)",
    "Freeway": "greedy 60.9 ± 0.8 over 4 seeds at 10M steps, reference 58 (results/minatar.md)",
    "SpaceInvaders": "greedy 158.8 ± 5.4 over 4 seeds at 10M steps, reference 131 "
                     "(results/minatar.md)",
    "Seaquest": "greedy 53.1 ± 3.1 over 4 seeds at 10M steps, no reference (results/minatar.md)",
}

# Brax and PureJaxRL's PPO batch: thousands of envs, normalised observations
_BRAX: dict[str, Any] = dict(
    num_envs=2048, rollout_steps=16, update_epochs=4, num_minibatches=16, learning_rate=3e-4,
    anneal_lr=False, gamma=0.99, ent_coef=0.0, max_grad_norm=0.5, reward_scale=0.1,
    hidden=(64, 64), normalize_obs=True,
)

# CleanRL's ppo_atari settings; 2.5M agent steps are 10M frames
_ATARI: dict[str, Any] = dict(
    total_steps=2_500_000, num_envs=8, rollout_steps=128, num_minibatches=4, update_epochs=4,
    learning_rate=2.5e-4, anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.1,
    ent_coef=0.01, vf_coef=0.5, clip_value=True, max_grad_norm=0.5, torso="nature_cnn",
)
_ATARI_REACHED = ("Breakout (envpool): training return 11.5 after 2.05M of the 10M frames, one "
                  "seed (docs/design/atari.md)")

TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", dict(update_epochs=8, reward_scale=0.1),
          "greedy 500.0 ± 0.0 over 4 seeds (results/classic.md); 16/16 seeds reach 475 under "
          "native/AVX/SSE4_2 (results/check_learning_epyc.md)"),
    Tuned("Acrobot-v1",
          dict(total_steps=600_000, learning_rate=1e-3, hidden=(64, 64), ent_coef=0.01),
          "greedy -79.0 ± 1.5 over 4 seeds at 600k steps, reference -80 (results/classic.md)"),
    Tuned("Pendulum-v1",
          dict(total_steps=1_000_000, num_envs=32, rollout_steps=128, update_epochs=10,
               num_minibatches=8, learning_rate=1e-3, gamma=0.98, reward_scale=0.1,
               normalize_obs=True, hidden=(64, 64)),
          "16/16 seeds reach -200, greedy -150.9 mean final, worst seed -201.0, at 1M steps "
          "(docs/notes/ppo.md); the optimum averages about -137 (docs/results-notes.md)"),
    Tuned("gymnasium:CartPole-v1",
          dict(num_envs=8, update_epochs=4, clip_value=True, reward_scale=0.1, ent_coef=0.01),
          "greedy: 16/16 seeds reach 475 and end at 500 under native/AVX/SSE4_2 "
          "(results/check_learning_epyc.md)"),
    Tuned("MountainCar-v0",
          dict(total_steps=500_000, num_envs=16, rollout_steps=32, update_epochs=64,
               learning_rate=5e-3, ent_coef=0.003, max_grad_norm=1.0, hidden=(64, 64)),
          "greedy -110.1 ± 7.1 over 4 seeds at 500k steps, reference -118 (results/classic.md)"),
    Tuned("MountainCarContinuous-v0",
          dict(total_steps=2_000_000, num_envs=32, rollout_steps=128, ent_coef=0.0,
               normalize_obs=True, learning_rate=3e-4, hidden=(64, 64)),
          "greedy 92.9 ± 0.0 over 4 seeds at 2M steps, reference 92 (results/classic.md)"),
    *(Tuned(f"{game}-MinAtar", _MINATAR, _MINATAR_REACHED[game]) for game in MINATAR_GAMES),
    Tuned("*-MinAtar", _MINATAR, "the settings measured on each of the five games, above"),
    Tuned("brax:*", dict(_BRAX, total_steps=5_000_000),
          "not measured: PureJaxRL's Brax batch; tuned per task only where an entry says"),
    Tuned("brax:inverted_pendulum", dict(_BRAX, total_steps=2_000_000),
          "greedy 1000, the most, over 16 episodes after 2M steps (docs/notes/ppo.md)"),
    Tuned("gymnasium:ALE/*", _ATARI, _ATARI_REACHED),
    Tuned("envpool:*-v5", _ATARI, _ATARI_REACHED),
    Tuned("MemoryChain-bsuite", dict(memory="gru", total_steps=500_000),
          "greedy 1.0 ± 0.0 over 4 seeds at 500k steps, at memory_length 5 and 30 "
          "(feed-forward: 0.0); docs/notes/ppo.md"),
    Tuned("*-popgym", dict(memory="gru", total_steps=1_000_000),
          "Easy levels of the rewritten tasks, seed 0, greedy at 1M steps: RepeatFirst 1.0, "
          "RepeatPrevious 1.0, StatelessCartPole 1.0 (the most), CountRecall -0.89; the 4-seed "
          "rows are to be re-measured (results/memory.md)"),
    Tuned("*-bsuite", dict(total_steps=500_000, num_envs=16, learning_rate=5e-4, anneal_lr=False,
                           ent_coef=0.01, max_grad_norm=1.0, hidden=(64, 64)),
          "not measured: Catch's settings with a larger budget for the other bsuite tasks"),
    Tuned("Catch-bsuite",
          dict(total_steps=100_000, num_envs=16, learning_rate=5e-4, anneal_lr=False,
               ent_coef=0.01, max_grad_norm=1.0, hidden=(64, 64)),
          "greedy 1.0 ± 0.0 over 4 seeds at 100k steps, reference 1 (results/bsuite.md)"),
)

# What the learning checks hold the shipped defaults to (jaxrl_sys.tools.learning_check)
PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0),
    LearningPromise("Acrobot-v1", -100.0, test_seeds=0,
                    note="the discrete path the suite trains on CartPole-v1; 16 seeds under "
                         "every setting: results/check_learning.md"),
    LearningPromise("Pendulum-v1", -200.0, overrides=(("total_steps", 500_000),),
                    note="500k of the shipped 1M steps "
                         "(results/check_learning_shorter_promises.md)"),
    LearningPromise("MemoryChain-bsuite", 0.95, overrides=(("total_steps", 100_000),),
                    chunks=10, note="recurrent (memory=gru): the context must be remembered"),
    LearningPromise("gymnasium:CartPole-v1", 475.0, eval_every=4,
                    note="host loop: one seed at a time; greedy evaluation in worker processes "
                         "every 4th chunk (evaluations cost seconds each); its own learning "
                         "test: tests/test_host_loop.py",
                    test_seeds=0),
)


def default_config(env_name: str) -> Config:
    """The PPO config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)


# the sizes of PPO's family entries (budget, network, observation normalisation), which the
# variants below start from on a family they were not tuned on
_FAMILY_SIZES: dict[str, dict[str, Any]] = {
    entry.env: {key: value for key, value in entry.overrides.items()
                if key in ("total_steps", "hidden", "activation", "normalize_obs",
                           "reward_scale", "gamma", "memory")}
    for entry in TUNED if entry.env in ("*-MinAtar", "brax:*", "*-bsuite", "*-popgym")
}
# A2C's batch on Brax: more envs than its 16 (Brax steps thousands at once); on MinAtar's
# Atari-like games, rl-baselines3-zoo's A2C Atari entry (hyperparams/a2c.yml): an entropy
# bonus of 0.01 and value coefficient 0.25, with Adam in place of RMSProp and GAE's lambda at
# 0.95 (how each was chosen: docs/notes/a2c.md)
_A2C_FAMILY: dict[str, dict[str, Any]] = {"brax:*": dict(num_envs=256),
                                          "*-MinAtar": dict(ent_coef=0.01, vf_coef=0.25,
                                                            optimizer="adam", gae_lambda=0.95)}

# A2C (Mnih et al. 2016, synchronous): one unclipped gradient step per short rollout, n-step
# returns (GAE with lambda 1 is the n-step return to the rollout's end) and RMSProp, as
# Stable-Baselines3's A2C sets them
A2C: dict[str, Any] = dict(
    objective="vanilla", update_epochs=1, num_minibatches=1, num_envs=16, rollout_steps=5,
    gae_lambda=1.0, normalize_advantages=False, optimizer="rmsprop", learning_rate=7e-4,
    anneal_lr=False, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, total_steps=500_000,
)
A2C_TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", {},
          "16/16 seeds reach 475 at 500k steps under native and AVX, mean final greedy 498.9 "
          "and 500.0 (results/check_learning_issue53.md)"),
    Tuned("Acrobot-v1", {}, "greedy -84.0 over 4 seeds at 500k steps, training returns "
          "[-85.7, -86.1, -86.8, -87.1] (docs/notes/a2c.md)"),
    Tuned("gymnasium:CartPole-v1", {},
          "host loop with staleness 1 (A3C's lag), one seed: training return 154 at 60k "
          "steps, 300 at 100k, 171 at 200k (docs/notes/a2c.md)"),
    Tuned("Breakout-MinAtar", dict(_FAMILY_SIZES["*-MinAtar"], **_A2C_FAMILY["*-MinAtar"]),
          "greedy 18.1 over 4 seeds at 10M steps (20.0, 23.0, 6.5, 23.0; lambda 1: 12.6; "
          "RMSProp: 6.0), PPO's 25.7 (docs/notes/a2c.md)"),
    *(Tuned(env, dict(overrides, **_A2C_FAMILY.get(env, {})),
            f"{NOT_MEASURED}: PPO's family entry with A2C's update")
      for env, overrides in _FAMILY_SIZES.items()),
)
A2C_PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0),
)

# REINFORCE with a learned baseline (Williams 1992): whole-episode returns, one unclipped
# gradient step per rollout of 4 envs x 1000 steps, long enough that most episodes end inside
# it; the learning rate annealed to 0 (held at 1e-2, 2 of 16 seeds collapsed late)
PG: dict[str, Any] = dict(
    objective="vanilla", targets="episode", update_epochs=1, num_minibatches=1, num_envs=4,
    rollout_steps=1000, normalize_advantages=True, learning_rate=1e-2, anneal_lr=True,
    ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, total_steps=500_000,
)
PG_TUNED: tuple[Tuned, ...] = (
    Tuned("CartPole-v1", {},
          "16/16 seeds reach 475 at 500k steps under native and AVX, mean final greedy 498.3 "
          "(results/check_learning_issue53.md)"),
    Tuned("Acrobot-v1", {}, "greedy -84.9 over 4 seeds at 500k steps, training returns "
          "[-88.3, -86.5, -87.1, -85.3] (docs/notes/a2c.md)"),
    *(Tuned(env, dict(overrides, memory="none"), f"{NOT_MEASURED}: PPO's family entry with "
            "REINFORCE's update, feed-forward (whole-episode returns take no memory)")
      for env, overrides in _FAMILY_SIZES.items()),
)
PG_PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("CartPole-v1", 475.0),
)


def a2c_config(env_name: str) -> Config:
    """A2C's config for `env_name`: `A2C` over `Config`'s defaults, then its tuned entry."""
    return tuned_config(dataclasses.replace(Config(), **A2C), A2C_TUNED, env_name)


def pg_config(env_name: str) -> Config:
    """REINFORCE's config for `env_name`: `PG` over `Config`'s defaults, then its tuned entry."""
    return tuned_config(dataclasses.replace(Config(), **PG), PG_TUNED, env_name)
