"""Record a run's policy to a dataset: `jaxrl-record RUN_DIR --episodes 100 --out datasets`.

Restores the run's latest checkpoint (or `--chunk N`), plays `--episodes` episodes on device
with the greedy policy, the agent's own exploring policy at the end of its schedule
(`--policy sampled`: sampled actions, DQN's last epsilon) or the greedy one with noise
(`--policy epsilon:E`: a random action with probability E, or Gaussian noise of E times the
half-range for continuous actions), and writes them as a Minari dataset
`OUT/<name>/data/`, read back by `minari.load_dataset` (with MINARI_DATASETS_PATH=OUT) and by
the offline agents (`--set dataset=OUT/<name>`). Bad input: one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded

def policy_choice(text: str) -> tuple[str, float]:
    """`--policy`'s value (`datasets.recording.parse_policy`), an argparse error otherwise."""
    from jaxrl_sys.datasets.recording import RecordingError, parse_policy

    try:
        return parse_policy(text)
    except RecordingError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory written by scripts/train.py")
    p.add_argument("--episodes", type=int, default=100, help="episodes to record")
    p.add_argument("--out", default="datasets",
                   help="the datasets root the dataset is written under (Minari's "
                        "MINARI_DATASETS_PATH layout)")
    p.add_argument("--name", default=None,
                   help="the Minari dataset id, (namespace/)name-v<version> (default: "
                        "<env>-<agent>-<policy>-v0)")
    p.add_argument("--policy", type=policy_choice, default=("greedy", 0.0),
                   help="greedy, sampled (the agent's exploring policy) or epsilon:E")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the recorded episodes")
    p.add_argument("--seed-index", type=int, default=0,
                   help="which of the run's seeds plays (its index in the run's seeds)")
    p.add_argument("--batch", type=int, default=64, help="episodes played per device call")
    p.add_argument("--from-replay", action="store_true",
                   help="write the checkpoint's replay buffer instead (every transition the "
                        "run stored up to it, as episodes); --episodes and --policy do not "
                        "apply")
    return p


def default_name(env_name: str, agent: str, policy: tuple[str, float]) -> str:
    """`<env>-<agent>-<policy>-v0` with characters Minari's ids refuse replaced."""
    kind = policy[0] if policy[0] != "epsilon" else f"epsilon{policy[1]:g}"
    return re.sub(r"[^A-Za-z0-9_\-]", "_", f"{env_name}-{agent}-{kind}").lower() + "-v0"


def record_run(args: argparse.Namespace) -> int:
    from jaxrl_sys.datasets.minari_format import check_dataset_id

    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    if args.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {args.batch}")
    if args.name is not None:
        check_dataset_id(args.name)

    import jax
    import numpy as np

    from jaxrl_sys import agents, envs
    from jaxrl_sys.datasets import recording
    from jaxrl_sys.datasets.minari_format import write_dataset
    from jaxrl_sys.runtime.run_spec import load_spec
    from jaxrl_sys.runtime.session import open_run

    if load_spec(args.run_dir).sweep:
        raise UsageError(f"{args.run_dir} is a sweep: record one of its settings' runs")
    saved = open_run(args.run_dir, agents.load, envs)
    resolved = saved.resolved
    if resolved.host:
        raise UsageError(f"{resolved.env_name} runs in worker processes: recording plays "
                         "pure-JAX envs on device only")
    spec = saved.agent.spec
    if spec.num_agents > 1 or spec.num_players > 1:
        raise UsageError(f"{resolved.env_name} is a team or two-player game: datasets hold "
                         "single-agent episodes")
    if not 0 <= args.seed_index < len(resolved.seeds):
        raise UsageError(f"--seed-index {args.seed_index}: the run has "
                         f"{len(resolved.seeds)} seed(s)")
    kind = "replay" if args.from_replay else args.policy[0]
    name = args.name or default_name(resolved.env_name, resolved.spec.agent,
                                     ("replay", 0.0) if args.from_replay else args.policy)
    target = Path(args.out) / name
    if target.exists():
        raise UsageError(f"{target} already exists: pick another --name or --out")

    carry, record = saved.restore(args.chunk)
    chunk = int(record["chunk"])
    epsilon = args.policy[1]
    if args.from_replay:
        episodes = replay_dataset(carry, record, args.seed_index)
    else:
        state = jax.tree.map(lambda x: x[args.seed_index], carry.agent_state)
        env_steps = min((chunk + 1) * saved.loop.iters_per_chunk,
                        resolved.config.num_iterations) * resolved.config.steps_per_iteration
        policy, params = recording.behaviour_policy(resolved.module, saved.agent, state, kind,
                                                    epsilon, env_steps)
        episodes = recording.record_episodes(saved.env, policy, params,
                                             jax.random.PRNGKey(args.seed), args.episodes,
                                             args.batch)

    returns = np.array([e.total_return for e in episodes])
    made_by = {"run": str(Path(args.run_dir).absolute()), "agent": resolved.spec.agent,
               "chunk": chunk, "seed_index": args.seed_index, "policy": kind,
               # a replay's first episodes may begin mid-way: its mean is of what was stored
               "mean_return": float(returns.mean())}
    if not args.from_replay:
        made_by.update(epsilon=epsilon, record_seed=args.seed)
    path = write_dataset(args.out, name, episodes, spec, resolved.env_name, made_by,
                         f"{len(episodes)} episodes of {resolved.spec.agent}'s {kind} policy "
                         f"on {resolved.env_name}, recorded by jaxrl-record")
    steps = sum(len(e) for e in episodes)
    what = "the replay buffer" if args.from_replay else f"{kind} policy"
    print(f"wrote {path}: {len(episodes)} episodes, {steps} steps, return "
          f"{returns.mean():.1f} +- {returns.std():.1f} ({what}, checkpoint after chunk "
          f"{chunk})")
    return 0


def replay_dataset(carry, record: dict, seed_index: int) -> list:
    """The episodes of seed `seed_index`'s replay in a restored carry, or a one-line refusal
    when the agent keeps no transitions or the checkpoint was saved without them."""
    import jax

    from jaxrl_sys.datasets.replay_export import replay_episodes, replay_of

    ring = replay_of(carry.env_state)
    if ring is None:
        raise UsageError("this run keeps no replay of transitions (obs, action, reward, "
                         "terminated, next_obs): record its policy instead")
    if not record.get("saved_replay", True):
        raise UsageError("the checkpoint was saved without its replay (--no-save-replay)")
    one = jax.device_get(jax.tree.map(lambda x: x[seed_index], ring))
    episodes = replay_episodes(one.data, one.position, one.size)
    if not episodes:
        raise UsageError("the checkpoint's replay is empty")
    return episodes


def main(argv: Optional[Sequence[str]] = None) -> int:
    from jaxrl_sys import agents, envs
    from jaxrl_sys.datasets.minari_format import DatasetError
    from jaxrl_sys.datasets.recording import RecordingError
    from jaxrl_sys.runtime.session import USER_ERRORS

    return guarded(lambda: record_run(build_parser().parse_args(argv)),
                   USER_ERRORS + agents.USER_ERRORS + envs.USER_ERRORS + (DatasetError,
                                                                      RecordingError))


def entry() -> None:
    """The `jaxrl-record` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
