"""MADDPG's shipped per-env configs as data, and the envs its learning checks hold it to."""

from __future__ import annotations

from jaxrl_sys.agents.maddpg.config import Config
from jaxrl_sys.core.config import NOT_MEASURED, Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "jaxmarl:MPE_simple_spread_v3"

TUNED: tuple[Tuned, ...] = (
    Tuned("jaxmarl:*", {},
          f"{NOT_MEASURED}: the MPE simple_spread settings (Config's) for the other JaxMARL "
          "tasks"),
    Tuned("jaxmarl:MPE_simple_spread_v3", dict(total_steps=5_000_000),
          "greedy team-sum return -27.9 at 5M steps over seeds 0-1 (-35.0 at 1M; MAPPO "
          "-27.1); continuous actions: -34.3 at 1M, where IPPO is at -56.5 (-35.0 at 5M) "
          "(results/maddpg.md)"),
    Tuned("jaxmarl:MPE_simple_tag_v3", dict(policies="by_team"),
          "predator-prey, an actor and critics per team: the predators catch a random prey "
          "6.31 times an episode (greedy, 4 seeds at 1M steps), 1.72 in self-play; random "
          "play 0.42 (results/marl.md)"),
    *(Tuned(f"jaxmarl:{env}", dict(policies="by_team"),
            f"{NOT_MEASURED}: an actor and critics per team, the simple_spread settings "
            "otherwise")
      for env in ("MPE_simple_adversary_v3", "MPE_simple_push_v3")),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("jaxmarl:MPE_simple_spread_v3", -60.0, overrides=(("total_steps", 300_000),),
                    chunks=6,
                    note="team-sum return (random play: -79), the first 300k steps of the "
                         "shipped 5M (no schedule depends on the budget; results/maddpg.md)"),
    LearningPromise("jaxmarl:MPE_simple_spread_v3", -60.0, overrides=(("total_steps", 300_000),),
                    chunks=6, env_params=(("action_type", "Continuous"),),
                    note="continuous actions (the deterministic policy gradient), the same "
                         "budget and bar (results/maddpg.md)"),
)


def default_config(env_name: str) -> Config:
    """The MADDPG config for `env_name`: `Config`'s defaults with that env's `TUNED`
    overrides."""
    return tuned_config(Config(), TUNED, env_name)
