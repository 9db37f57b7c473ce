"""Atari frames/s on both host-loop backends: Gymnasium ALE worker processes and envpool threads.

`python benchmarks/bench_atari.py` (or `benchmarks/bench.py --sections atari`). For one game, side
by side in one run and alternating: raw stepping with random actions and PPO training with the
shipped Atari defaults (8 envs x 128 steps, Nature torso; compile and start-up excluded), on
`gymnasium:ALE/<game>-v5` and on `envpool:<game>-v5`. Frames are agent steps x 4 (frame
skip). Medians over `--repeats`, and the envpool/Gymnasium ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench_host import host_steps_per_second, raw_steps_per_second

FRAME_SKIP = 4


def backends(game: str) -> dict[str, str]:
    """Backend label -> env name for `game` (e.g. "Breakout")."""
    return {"Gymnasium workers": f"gymnasium:ALE/{game}-v5", "envpool": f"envpool:{game}-v5"}


def atari_table(game: str = "Breakout", num_envs: int = 8, repeats: int = 3,
                raw_steps: int = 1000, iterations: int = 4) -> list[str]:
    """Markdown rows: raw and PPO frames/s per backend (medians), and envpool's ratios."""
    names = backends(game)
    raw: dict[str, list[float]] = {label: [] for label in names}
    ppo: dict[str, list[float]] = {label: [] for label in names}
    for _ in range(repeats):
        for label, name in names.items():
            raw[label].append(FRAME_SKIP * raw_steps_per_second(name, num_envs, raw_steps))
            rate, _ = host_steps_per_second("ppo", name, num_envs, iterations, staleness=1)
            ppo[label].append(FRAME_SKIP * rate)
    rows = [
        f"### Atari: {game}, {num_envs} envs (median of {repeats}; frames = 4 x agent steps)",
        "",
        "| backend | raw stepping, frames/s | PPO training, frames/s |",
        "| --- | ---: | ---: |",
    ]
    medians = {label: (statistics.median(raw[label]), statistics.median(ppo[label]))
               for label in names}
    for label, (raw_rate, ppo_rate) in medians.items():
        rows.append(f"| {label} (`{names[label]}`) | {raw_rate:,.0f} | {ppo_rate:,.0f} |")
    (raw_gym, ppo_gym), (raw_pool, ppo_pool) = medians.values()
    rows += [f"| envpool / Gymnasium workers | {raw_pool / raw_gym:.2f}x | "
             f"{ppo_pool / ppo_gym:.2f}x |", ""]
    return rows


# DQN on Atari frames for the throughput rows: the Nature torso, Ape-X's per-env epsilons,
# one update of 32 per 4 agent steps as in the Nature DQN, a small replay, learning at once
DQN_ATARI = {"torso": "nature_cnn", "exploration": "apex", "rollout_steps": 4,
             "updates_per_iteration": 8, "batch_size": 32, "buffer_size": 8192,
             "learning_starts": 512}
# (label, agent, actor threads, devices, config overrides)
SEBULBA_CASES = (
    ("PPO", "ppo", 1, 1, {}),
    ("PPO", "ppo", 2, 1, {}),
    ("DQN, Ape-X epsilons", "dqn", 1, 1, DQN_ATARI),
    ("DQN, Ape-X epsilons", "dqn", 2, 2, DQN_ATARI),
)


def sebulba_table(game: str = "Breakout", num_envs: int = 8, repeats: int = 3,
                  iterations: int = 4) -> list[str]:
    """Markdown rows: training frames/s on `envpool:<game>-v5` through the host loop with 1
    and 2 actor threads (PPO), and DQN with Ape-X exploration on 1 and 2 devices (medians)."""
    name = f"envpool:{game}-v5"
    rates: dict[int, list[float]] = {i: [] for i in range(len(SEBULBA_CASES))}
    for _ in range(repeats):
        for i, (_, agent, threads, devices, overrides) in enumerate(SEBULBA_CASES):
            steps = iterations if agent == "ppo" else iterations * 32  # the same env steps
            rate, _ = host_steps_per_second(agent, name, num_envs, steps, staleness=1,
                                            threads=threads, devices=devices,
                                            overrides=overrides)
            rates[i].append(FRAME_SKIP * rate)
    rows = [
        f"### Sebulba: `{name}`, {num_envs} envs, training frames/s (median of {repeats})",
        "",
        "| agent | actor threads | devices | frames/s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for i, (label, _, threads, devices, _) in enumerate(SEBULBA_CASES):
        rows.append(f"| {label} | {threads} | {devices} | {statistics.median(rates[i]):,.0f} |")
    return rows + [""]


def main() -> int:
    from jaxrl_sys.runtime.devices import request_devices

    request_devices(2)  # the XLA:CPU flags of scripts/train.py; two devices for the DQN row
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--raw-steps", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=4,
                        help="PPO iterations (of num_envs x 128 steps) timed per repeat")
    parser.add_argument("--sebulba-only", action="store_true",
                        help="only the envpool table of actor threads and devices")
    args = parser.parse_args()
    if not args.sebulba_only:
        print("\n".join(atari_table(args.game, args.num_envs, args.repeats, args.raw_steps,
                                    args.iterations)))
    print("\n".join(sebulba_table(args.game, args.num_envs, args.repeats, args.iterations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
