"""QMIX's and VDN's shipped per-env configs as data, and the envs their learning checks hold
them to. The figures behind each entry are in results/marl_qmix.md."""

from __future__ import annotations

import dataclasses

from jaxrl_sys.agents.qmix.config import Config
from jaxrl_sys.core.config import Tuned, tuned_config
from jaxrl_sys.core.types import LearningPromise

DEFAULT_ENV = "jaxmarl:MPE_simple_spread_v3"

# JaxMARL's recurrent SMAX baseline (ql_rnn_smax.yaml) where it fits ours: a GRU after one
# relu layer, gamma 0.99, mixer 64 wide with 256-wide hypernetworks, gradient norm 10; and
# pymarl's QMIX settings for SMAC: learning rate 5e-4, target copies every 200 updates, short
# exploration. Replayed items are 32 steps after a 16-step burn-in.
_SMAX = dict(memory="gru", hidden=(128,), memory_size=128, num_envs=32, rollout_steps=32,
             seq_length=32, burn_in=16, buffer_size=5_000, batch_size=32,
             updates_per_iteration=8, gamma=0.99, learning_rate=5e-4, anneal_lr=False,
             max_grad_norm=10.0, target_update_period=200, exploration_fraction=0.05,
             reward_scale=3.0, mixer_embedding=64, mixer_hypernet_hidden=256,
             total_steps=3_000_000)

TUNED: tuple[Tuned, ...] = (
    Tuned("jaxmarl:*", {},
          "not measured: the MPE simple_spread settings (Config's) for the other JaxMARL tasks"),
    Tuned("jaxmarl:MPE_simple_spread_v3", {},
          "5M steps, 4 seeds, greedy team-sum return: qmix -36.5 (CPU) / -40.4 (H200), "
          "vdn -31.4 (H200); random play about -80"),
    Tuned("jaxmarl:SMAX:*", _SMAX,
          "3m, 3M steps, 4 seeds, greedy win rate on an H200: qmix 0.92, vdn 0.91"),
)

PROMISES: tuple[LearningPromise, ...] = (
    LearningPromise("jaxmarl:MPE_simple_spread_v3", -60.0, overrides=(("total_steps", 600_000),),
                    chunks=10,
                    note="team-sum return; random play: -79; 600k steps, 16 seeds for each "
                         "mixer (results/check_learning_shorter_promises.md)"),
)


def default_config(env_name: str) -> Config:
    """The QMIX config for `env_name`: `Config`'s defaults with its tuned entry applied."""
    return tuned_config(Config(), TUNED, env_name)


def vdn_config(env_name: str) -> Config:
    """VDN's: QMIX's config for `env_name` with the team's Q the sum of the agents'."""
    return dataclasses.replace(default_config(env_name), mixer="vdn")
