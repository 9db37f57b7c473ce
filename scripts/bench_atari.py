"""Atari frames/s on both host-loop backends: Gymnasium ALE worker processes and envpool threads.

`python scripts/bench_atari.py` (or `scripts/bench.py --sections atari`). For one game, side
by side in one run and alternating: raw stepping with random actions and PPO training with the
shipped Atari defaults (8 envs x 128 steps, Nature torso; compile and start-up excluded), on
`gymnasium:ALE/<game>-v5` and on `envpool:<game>-v5`. Frames are agent steps x 4 (frame
skip). Medians over `--repeats`, and the envpool/Gymnasium ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from bench_host import host_ppo_steps_per_second, raw_steps_per_second

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
            rate, _ = host_ppo_steps_per_second(name, num_envs, iterations, staleness=1)
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


def main() -> int:
    from jaxrl_sys.runtime.devices import request_devices

    request_devices(1)  # the same XLA:CPU flags as scripts/train.py
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--raw-steps", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=4,
                        help="PPO iterations (of num_envs x 128 steps) timed per repeat")
    args = parser.parse_args()
    print("\n".join(atari_table(args.game, args.num_envs, args.repeats, args.raw_steps,
                                args.iterations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
