"""Evaluate a run's checkpoint: `python scripts/evaluate.py RUN_DIR --episodes 32`.

Rebuilds the run's agent from the flags it was started with, restores its latest checkpoint
(or `--chunk N`), plays greedy episodes for every seed of the run, on device (or in worker
processes through the host loop for `gymnasium:` envs), and prints the mean +- std of the
return and the length. `--render out.gif` also draws one greedy episode of the first seed
(gymnax classic-control envs and Gymnasium envs that render). Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import train  # noqa: E402  (the run's flags and agent set-up are train.py's)


def build_parser() -> argparse.ArgumentParser:
    p = train._Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory written by scripts/train.py")
    p.add_argument("--episodes", type=int, default=32, help="greedy episodes per seed")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--render", default=None, metavar="OUT.gif",
                   help="also write one greedy episode of the first seed as an animated GIF")
    return p


def evaluate_run(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        raise train.UsageError(f"--episodes must be >= 1, got {args.episodes}")
    if args.render is not None and not args.render.lower().endswith(".gif"):
        raise train.UsageError(f"--render must name a .gif file, got {args.render}")
    run_args = train.resumed_args(argparse.Namespace(resume=args.run_dir, no_progress=True))
    from jaxrl_sys.devices import enable_compile_cache, request_devices

    request_devices(run_args.devices)
    enable_compile_cache()
    import jax
    import jax.numpy as jnp
    import numpy as np

    import envs
    from envs.render import ClassicControlRenderer, write_gif
    from jaxrl_sys.checkpoint import Checkpointer
    from jaxrl_sys.evaluation import evaluate
    from jaxrl_sys.execution import place

    setup = train.build_agent(run_args)
    if getattr(setup.config, "normalize_obs", False):
        raise train.UsageError("evaluate.py needs a run with normalize_obs=false (the "
                               "statistics live in the training envs)")
    if setup.host:
        return evaluate_host_run(args, run_args, setup)
    renderer = ClassicControlRenderer(setup.env_name) if args.render else None
    runner = place(*setup.module.placement_fns(setup.agent), num_envs=setup.config.num_envs,
                   num_devices=run_args.devices)
    seeds = np.arange(run_args.seed, run_args.seed + run_args.seeds)
    checkpointer = Checkpointer(args.run_dir, create=False)
    try:
        carry, record = checkpointer.restore(runner.init(seeds), args.chunk)
    finally:
        checkpointer.close()

    eval_env = envs.make_eval(setup.env_name, **setup.env_kwargs)
    policy = setup.module.greedy_action(setup.agent)
    episode_ids = jnp.arange(args.episodes)

    @jax.jit
    def run_episodes(agent_states, key):
        one_seed = lambda state: evaluate(eval_env, policy, state, key, episode_ids)  # noqa: E731
        return jax.vmap(one_seed)(agent_states)

    key = jax.random.PRNGKey(args.seed)
    returns, lengths = jax.device_get(run_episodes(carry.agent_state, key))
    report(run_args.agent, setup.env_name, record["chunk"], args.episodes, seeds, returns,
           lengths)
    if renderer is not None:
        first = jax.tree.map(lambda x: x[0], carry.agent_state)
        frames = render_episode(eval_env, policy, first, key, renderer)
        write_gif(frames, args.render)
        print(f"wrote {args.render} ({len(frames)} frames)")
    return 0


def report(agent: str, env_name: str, chunk: int, episodes: int, seeds, returns, lengths) -> None:
    """Per-seed and overall mean +- std of returns and lengths [seeds, episodes]."""
    print(f"{agent} on {env_name}, checkpoint after chunk {chunk}, {episodes} greedy episodes x "
          f"{len(seeds)} seed(s):")
    for seed, r, n in zip(seeds, returns, lengths):
        print(f"  seed {seed}: return {r.mean():.1f} +- {r.std():.1f}, length {n.mean():.1f} "
              f"+- {n.std():.1f}")
    print(f"return {returns.mean():.1f} +- {returns.std():.1f}, length {lengths.mean():.1f} "
          f"+- {lengths.std():.1f}")


def evaluate_host_run(args: argparse.Namespace, run_args: argparse.Namespace, setup) -> int:
    """A gymnasium: run: greedy episodes in worker processes through the host loop."""
    import jax
    import numpy as np

    from envs.render import gymnasium_episode_frames, write_gif
    from jaxrl_sys import host_loop
    from jaxrl_sys.checkpoint import Checkpointer

    checkpointer = Checkpointer(args.run_dir, create=False)
    try:
        template = {"agent_state": setup.agent.init(jax.random.PRNGKey(0))}
        restored, record = checkpointer.restore(template, args.chunk)
    finally:
        checkpointer.close()
    agent_state = restored["agent_state"]
    policy = setup.module.greedy_action(setup.agent)
    returns, lengths = host_loop.evaluate(setup.env, policy, agent_state, args.episodes,
                                          seed=args.seed)
    report(run_args.agent, setup.env_name, record["chunk"], args.episodes, [run_args.seed],
           returns[None], lengths[None])
    if args.render is not None:
        act = jax.jit(lambda obs, step: policy(agent_state, obs,
                                               jax.random.fold_in(jax.random.PRNGKey(0), step)))
        frames = gymnasium_episode_frames(
            setup.env.env_id, setup.env.kwargs, lambda obs, step: act(obs, np.int32(step)),
            setup.env.encode_obs, setup.env.decode_actions, seed=args.seed,
        )
        write_gif(frames, args.render)
        print(f"wrote {args.render} ({len(frames)} frames)")
    return 0


def render_episode(env, policy, agent_state, key, renderer) -> list:
    """Frames of one greedy episode, from the first observation to the last state."""
    import jax

    reset = jax.jit(env.reset)
    step = jax.jit(env.step)
    act = jax.jit(lambda obs, state, k: policy(
        agent_state, obs[None], k, env_state=jax.tree.map(lambda x: x[None], state))[0])
    reset_key, run_key = jax.random.split(key)
    obs, state = reset(reset_key)
    frames = [renderer.frame(state)]
    for t in range(env.spec.max_episode_steps):
        act_key, step_key = jax.random.split(jax.random.fold_in(run_key, t))
        obs, state, _, terminated, truncated, _ = step(step_key, state, act(obs, state, act_key))
        if bool(terminated) or bool(truncated):  # the env has already reset: stop here
            break
        frames.append(renderer.frame(state))
    renderer.close()
    return frames


def main(argv: Optional[Sequence[str]] = None) -> int:
    from envs.render import RenderError
    from jaxrl_sys.checkpoint import CheckpointError
    from jaxrl_sys.host_loop import HostLoopError

    try:
        return evaluate_run(build_parser().parse_args(argv))
    except (train.UsageError, CheckpointError, RenderError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except HostLoopError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
