"""Throughput benchmarks, printed as Markdown tables: `python benchmarks/bench.py`.

PPO env-steps/s (acting and learning) beside raw env stepping (random actions, no agent)
at the same env counts, measured in one run; DQN/SAC/MuZero training rates; MuZero search
simulations/s; replay add/sample rates; each figure is the median of `--repeats` timed
compiled calls after a warm-up call, so compilation is excluded.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from timing import median_seconds


def raw_env_steps_per_second(env_name: str, num_envs: int, steps: int, repeats: int) -> float:
    """Random-action stepping of `num_envs` vmapped envs, `steps` steps per compiled call."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys import envs
    from jaxrl_sys.core.rollout import reset_envs, step_envs

    env = envs.make(env_name)
    n_actions = env.spec.action_space.n

    @jax.jit
    def run(state, key):
        def body(state, t):
            act_key, step_key = jax.random.split(jax.random.fold_in(key, t))
            actions = jax.random.randint(act_key, (num_envs,), 0, n_actions)
            state, result = step_envs(env, state, actions, step_key)
            return state, result.reward.sum()

        return jax.lax.scan(body, state, jnp.arange(steps))

    state = reset_envs(env, jax.random.PRNGKey(0), jnp.arange(num_envs))
    key = jax.random.PRNGKey(1)
    seconds = median_seconds(lambda: jax.block_until_ready(run(state, key)), repeats)
    return num_envs * steps / seconds


def agent_steps_per_second(
    agent_name: str, env_name: str, num_envs: int | None, iters: int, repeats: int,
    num_devices: int = 1, **overrides,
) -> float:
    """Training throughput (env steps per second, acting and learning) of one seed on
    `num_devices` devices, with the agent's default config for `env_name` (and `num_envs`,
    `overrides` if given); the global batch and env count do not depend on the devices."""
    import jax
    import numpy as np

    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime.execution import place, placement_fns

    module = agents.load(agent_name)
    config = module.default_config(env_name)
    if num_envs is not None:
        config = dataclasses.replace(config, num_envs=num_envs)
    config = dataclasses.replace(config, **overrides)
    agent = module.make(envs.make(env_name), config)
    runner = place(*placement_fns(agent), num_envs=config.num_envs, iters_per_chunk=iters,
                   num_devices=num_devices)
    carry = [runner.init(np.arange(1))]
    run_chunk = runner.run_chunk.lower(carry[0]).compile()

    def one_chunk():
        carry[0], metrics = run_chunk(carry[0])
        jax.block_until_ready(metrics)

    seconds = median_seconds(one_chunk, repeats)
    return iters * config.steps_per_iteration / seconds


def ppo_table(env_name: str, sizes: list[int], repeats: int) -> list[str]:
    from jaxrl_sys.agents import ppo

    rollout_steps = ppo.default_config(env_name).rollout_steps
    rows = [
        "| envs | PPO env-steps/s | raw env-steps/s | PPO / raw |",
        "|---:|---:|---:|---:|",
    ]
    for n in sizes:
        iters = max(2, 65_536 // (n * rollout_steps))  # ~64k env steps per timed call
        ppo_rate = agent_steps_per_second("ppo", env_name, n, iters, repeats)
        raw_rate = raw_env_steps_per_second(env_name, n, iters * rollout_steps, repeats)
        rows.append(f"| {n} | {ppo_rate:,.0f} | {raw_rate:,.0f} | {ppo_rate / raw_rate:.3f} |")
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def agents_table(repeats: int) -> list[str]:
    """Default-config training throughput of each off-policy agent on its default env."""
    rows = ["| agent | env | envs | env-steps/s (acting + learning) |", "|---|---|---:|---:|"]
    for name in ("dqn", "sac"):
        from jaxrl_sys import agents

        module = agents.load(name)
        config = module.default_config(module.DEFAULT_ENV)
        iters = max(2, 8_192 // config.steps_per_iteration)
        rate = agent_steps_per_second(name, module.DEFAULT_ENV, None, iters, repeats)
        rows.append(f"| {name} | {module.DEFAULT_ENV} | {config.num_envs} | {rate:,.0f} |")
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def search_simulations_per_second(
    env_name: str, search: str, batch: int, simulations: int, repeats: int,
    model: str = "learned",
) -> float:
    """Simulations per second of one batched MuZero search (`batch` roots, `simulations` each)
    from fresh games, with freshly initialised default networks for `env_name`."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys import envs
    from jaxrl_sys.agents import muzero
    from jaxrl_sys.core.rollout import legal_actions, reset_envs

    env = envs.make(env_name)
    config = dataclasses.replace(
        muzero.default_config(env_name), search=search, num_simulations=simulations, model=model
    )
    agent = muzero.make(env, config, axis_name=None)
    params = agent.init(jax.random.PRNGKey(0)).params
    vstate = reset_envs(env, jax.random.PRNGKey(1), jnp.arange(batch))
    legal = legal_actions(env, vstate.env_state)
    run = jax.jit(lambda p, v, l, k: agent.search(p, v.obs, l, k, env_state=v.env_state).action)
    key = jax.random.PRNGKey(2)
    seconds = median_seconds(lambda: jax.block_until_ready(run(params, vstate, legal, key)),
                             repeats)
    return batch * simulations / seconds


def muzero_table(repeats: int, devices: int) -> list[str]:
    """Search throughput at batch 256 x 32 simulations, default-config self-play rates, and
    CartPole self-play on 1 and on `devices` devices side by side (the same global batch)."""
    from jaxrl_sys.agents import muzero

    rows = ["| what | env | setting | rate |", "|---|---|---|---:|"]
    for env_name in ("CartPole-v1", "TicTacToe-v0"):
        for search in ("gumbel", "muzero"):
            rate = search_simulations_per_second(env_name, search, 256, 32, repeats)
            rows.append(f"| search ({search}) | {env_name} | 256 roots x 32 simulations | "
                        f"{rate:,.0f} simulations/s |")
            print(rows[-1], file=sys.stderr, flush=True)
    for env_name in ("TicTacToe-v0", "pgx:connect_four"):
        rate = search_simulations_per_second(env_name, "gumbel", 256, 32, repeats, model="env")
        rows.append(f"| search (gumbel, AlphaZero: model=env) | {env_name} | 256 roots x 32 "
                    f"simulations | {rate:,.0f} simulations/s |")
        print(rows[-1], file=sys.stderr, flush=True)
    for env_name, model in (("CartPole-v1", "learned"), ("TicTacToe-v0", "learned"),
                            ("TicTacToe-v0", "env"), ("pgx:connect_four", "env")):
        config = muzero.default_config(env_name)
        iters = max(2, 2_048 // config.steps_per_iteration)  # board games are slow on a CPU
        rate = agent_steps_per_second("muzero", env_name, None, iters, repeats, model=model)
        rows.append(f"| self-play + learning{' (AlphaZero)' if model == 'env' else ''} | "
                    f"{env_name} | default config, {config.num_envs} envs, "
                    f"{config.num_simulations} simulations | {rate:,.0f} env-steps/s |")
        print(rows[-1], file=sys.stderr, flush=True)
    if devices > 1:
        config = muzero.default_config("CartPole-v1")
        iters = max(2, 8_192 // config.steps_per_iteration)
        for n in (1, devices):
            rate = agent_steps_per_second("muzero", "CartPole-v1", None, iters, repeats,
                                          num_devices=n)
            rows.append(f"| self-play + learning, {n} device{'s' if n > 1 else ''} | "
                        f"CartPole-v1 | default config, {config.num_envs} envs and batch "
                        f"{config.batch_size} in all | {rate:,.0f} env-steps/s |")
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def script_table(script: str, *args: str) -> list[str]:
    """The markdown table printed by a sibling bench script, run in its own process (its own
    XLA flags and a fresh heap, as when it is run alone)."""
    done = subprocess.run([sys.executable, str(Path(__file__).with_name(script)), *args],
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: {script} failed: {done.stderr.strip().splitlines()[-1:]}")
    return [line for line in done.stdout.splitlines() if line.startswith("|")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--sizes", default="4,64,1024", help="comma-separated env counts")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--devices", type=int, default=8,
                        help="MuZero self-play is also timed on this many devices (virtual CPU "
                             "devices where there is no accelerator); 1 skips it")
    parser.add_argument("--sections",
                        default="ppo,minatar,agents,muzero,replay,host,atari,checkpoint,sweep",
                        help="comma-separated: ppo, minatar, agents, muzero, replay, host, "
                             "atari, checkpoint, sweep")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="also time MuZero on Breakout-MinAtar at commit REV and at this "
                             "tree, alternately (benchmarks/bench_commits.py)")
    parser.add_argument("--minatar-sizes", default="64,1024",
                        help="env counts of the PPO Breakout-MinAtar rows (64: the default)")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        minatar_sizes = [int(s) for s in args.minatar_sizes.split(",")]
        if min(sizes + minatar_sizes) < 1 or args.repeats < 1 or args.devices < 1:
            raise ValueError
    except ValueError:
        print("error: --sizes and --minatar-sizes must be positive integers, --repeats and "
              "--devices >= 1", file=sys.stderr)
        return 2

    from jaxrl_sys.runtime.devices import describe, request_devices

    request_devices(args.devices)
    import jax

    if args.devices > len(jax.devices()):
        print(f"error: --devices {args.devices}: only {len(jax.devices())} devices here",
              file=sys.stderr)
        return 2

    print(f"# jaxrl_sys bench: {describe()}, jax {jax.__version__}, "
          f"{time.strftime('%Y-%m-%d')}, median of {args.repeats}\n")
    sections = args.sections.split(",")
    if "ppo" in sections:
        print(f"## PPO on {args.env}, one device, one seed\n")
        print("\n".join(ppo_table(args.env, sizes, args.repeats)) + "\n")
    if "minatar" in sections:
        print("## PPO on Breakout-MinAtar (default config: 128 steps per env, two layers of "
              "256), one device, one seed\n")
        print("\n".join(ppo_table("Breakout-MinAtar", minatar_sizes, args.repeats)) + "\n")
    if "agents" in sections:
        print("## DQN and SAC, default configs, one device, one seed\n")
        print("\n".join(agents_table(args.repeats)) + "\n")
    if "muzero" in sections:
        print("## MuZero, one seed (one device unless a row says otherwise)\n")
        print("\n".join(muzero_table(args.repeats, args.devices)) + "\n")
    if args.baseline is not None:
        print("## MuZero on Breakout-MinAtar against a baseline commit, alternately\n")
        print("\n".join(script_table("bench_commits.py", "--baseline", args.baseline)) + "\n")
    if "replay" in sections:
        print("## Replay add + sample, one device\n")
        print("\n".join(script_table("bench_replay.py")) + "\n")
    if "host" in sections:
        print("## Host loop (gymnasium: envs in worker processes)\n")
        print("\n".join(script_table("bench_host.py", "--repeats", str(args.repeats))) + "\n")
    if "atari" in sections:
        print("## Atari through the host loop: Gymnasium ALE workers against envpool\n")
        print("\n".join(script_table("bench_atari.py", "--repeats", str(args.repeats))) + "\n")
    if "checkpoint" in sections:
        print("## Checkpoints (whole carry, one seed, one device)\n")
        print("\n".join(script_table("bench_checkpoint.py")) + "\n")
    if "sweep" in sections:
        print("## A sweep against separate runs, end to end (wall clock, cold compile caches)\n")
        print("\n".join(script_table("bench_sweep.py", "--devices", str(args.devices))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
