"""MAPPO's and IPPO's shipped per-env configs as data, and the envs their learning checks hold
them to. How each was found, with the runs behind the figures: results/marl.md."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.mappo.agent import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "jaxmarl:MPE_simple_spread_v3"

# after JaxMARL's SMAX baselines (mappo_homogenous_rnn_smax.yaml: relu, lr 2e-3, no entropy
# bonus, gradient norm 0.25), feed-forward and half their batch to fit two CPU cores
_SMAX = dict(num_envs=64, rollout_steps=128, hidden=(64, 64), activation="relu",
             max_grad_norm=0.25, learning_rate=2e-3, ent_coef=0.0)

TUNED: tuple[Tuned, ...] = (
    Tuned("jaxmarl:*", {},
          "not measured: the MPE simple_spread settings (Config's) for the other JaxMARL tasks"),
    Tuned("jaxmarl:MPE_simple_spread_v3", {},
          "greedy -27.1 (MAPPO), -28.7 (IPPO) over 4 seeds at 5M steps (results/marl.md)"),
    Tuned("jaxmarl:SMAX:*", dict(_SMAX, total_steps=3_000_000),
          "3m: greedy win rate 0.76 (MAPPO), 0.82 (IPPO) over 4 seeds at 3M steps, short of "
          "0.95; 128-wide layers and an entropy bonus did not reach it either (results/marl.md)"),
    Tuned("jaxmarl:MPE_simple_tag_v3", dict(policies="by_team"),
          "predator-prey, a policy per team: self-play predators catch 3.81 per episode "
          "(greedy, 4 seeds at 5M steps), against a frozen random prey 6.99; random play "
          "0.42 (results/marl.md)"),
    *(Tuned(f"jaxmarl:{env}", dict(policies="by_team"),
            f"{NOT_MEASURED}: a policy per team, the simple_spread settings otherwise")
      for env in ("MPE_simple_adversary_v3", "MPE_simple_push_v3")),
    Tuned("jaxmarl:SMAX:2s3z", dict(_SMAX, total_steps=10_000_000),
          "greedy win rate 1.00 (MAPPO) on each of seeds 0-3 at 10M steps, 0.98-1.00 from "
          "1.5M on (results/marl.md)"),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("jaxmarl:MPE_simple_spread_v3", -60.0, overrides=(("total_steps", 1_000_000),),
                    chunks=10, note="team-sum return; random play: -79"),
    LearningPromise("jaxmarl:MPE_simple_tag_v3", 50.0,
                    overrides=(("total_steps", 300_000), ("frozen_teams", ("agent",))),
                    chunks=3, note="predators' return against a random prey (frozen at its "
                                   "initial policy): 30 per catch; random play: 12.7"),
)
# IPPO's (ippo.py): the same cases but predator-prey, whose policies by team MAPPO's trains
IPPO_PROMISES = PROMISES[:1]


def default_config(env_name: str) -> Config:
    """The MAPPO config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)


def ippo_config(env_name: str) -> Config:
    """IPPO's: MAPPO's config for `env_name` with each agent's critic on its own observation."""
    return dataclasses.replace(default_config(env_name), critic="local")
