"""Evaluate a run's checkpoint: `python scripts/evaluate.py RUN_DIR --episodes 32`.

Rebuilds the run's agent from the flags it was started with, restores its latest checkpoint
(or `--chunk N`), plays greedy episodes for every seed of the run, on device (or in worker
processes through the host loop for `gymnasium:` envs), and prints the mean +- std of the
return and the length. `--render out.gif` also draws one greedy episode of the first seed
(gymnax classic-control envs, Gymnasium envs that render, Brax, JaxMARL's MPE and SMAX). A
sweep's setting is picked with `--setting N`; `--setting all` ranks every setting of the latest
checkpoints (a PBT population's members, a halving run's survivors). Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded



def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory written by scripts/train.py")
    p.add_argument("--episodes", type=int, default=32, help="greedy episodes per seed")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--setting", type=setting_choice, default=None,
                   help="a sweep's setting (its index in sweep.md) to evaluate, or `all`: every "
                        "setting in the latest checkpoints, ranked")
    p.add_argument("--render", default=None, metavar="OUT.gif",
                   help="also write one greedy episode of the first seed as an animated GIF")
    return p


def setting_choice(text: str) -> "int | str":
    """`--setting`'s value: an index, or `all`."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an index or `all`, got {text!r}") from None


def evaluate_run(args: argparse.Namespace) -> int:
    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    if args.render is not None and not args.render.lower().endswith(".gif"):
        raise UsageError(f"--render must name a .gif file, got {args.render}")
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.runtime import sweeps
    from jaxrl_sys.runtime.run_spec import load_spec
    from jaxrl_sys.runtime.session import open_run

    is_sweep = bool(load_spec(args.run_dir).sweep)
    if is_sweep != (args.setting is not None):
        raise UsageError(f"{args.run_dir} is a sweep: pick a setting with --setting N (see its "
                         "sweep.md)" if is_sweep else "--setting is for sweeps only")
    if args.setting == "all":
        if args.render is not None:
            raise UsageError("--render draws one setting: pick it with --setting N")
        return evaluate_settings(args)
    if is_sweep:
        saved = sweeps.open_setting(args.run_dir, args.setting, agents.load, envs)
    else:
        saved = open_run(args.run_dir, agents.load, envs)
        if saved.resolved.host:
            return evaluate_host_run(args, saved)
    carry, record = saved.restore(args.chunk)
    resolved = saved.resolved
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.envs.render import make_renderer, write_gif
    from jaxrl_sys.core.evaluation import evaluate, evaluate_teams

    eval_env = resolved.make_eval_env(envs)
    renderer = make_renderer(resolved.env_name, eval_env) if args.render else None
    policy = resolved.module.greedy_action(saved.agent)
    episode_ids = jnp.arange(args.episodes)

    @jax.jit
    def run_episodes(agent_states, key):
        one_seed = lambda state: evaluate(eval_env, policy, state, key, episode_ids)  # noqa: E731
        return jax.vmap(one_seed)(agent_states)

    key = jax.random.PRNGKey(args.seed)
    returns, lengths = jax.device_get(run_episodes(carry.agent_state, key))
    report(resolved.spec.agent, resolved.env_name, record["chunk"], args.episodes,
           resolved.seeds, returns, lengths)
    if eval_env.spec.team_names:  # competing teams: each team's return of the same episodes
        team_returns = jax.jit(jax.vmap(
            lambda state: evaluate_teams(eval_env, policy, state, key, episode_ids)))
        report_teams(eval_env.spec.team_names,
                     jax.device_get(team_returns(carry.agent_state)))
    if renderer is not None:
        first = jax.tree.map(lambda x: x[0], carry.agent_state)
        frames = render_episode(eval_env, policy, first, key, renderer)
        write_gif(frames, args.render)
        print(f"wrote {args.render} ({len(frames)} frames)")
    return 0


def evaluate_settings(args: argparse.Namespace) -> int:
    """`--setting all`: the greedy return of every setting in its group's checkpoint, one
    compiled call per group (a PBT population, a halving run's survivors), best first."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.core.evaluation import evaluate
    from jaxrl_sys.runtime import sweeps

    rows = []
    for group in sweeps.open_groups(args.run_dir, agents.load, envs):
        members, carry, record = group.restore(args.chunk)
        eval_env = group.resolved.make_eval_env(envs)
        policy = group.resolved.module.greedy_action(group.agent)
        episode_ids = jnp.arange(args.episodes)

        @jax.jit
        def run_episodes(agent_states, key):
            one_row = lambda state: evaluate(eval_env, policy, state, key, episode_ids)  # noqa: E731
            return jax.vmap(one_row)(agent_states)

        returns, _ = jax.device_get(run_episodes(carry.agent_state, jax.random.PRNGKey(args.seed)))
        returns = np.asarray(returns).reshape(len(members), -1)
        rows += [(m, int(record["chunk"]), r) for m, r in zip(members, returns)]
    if not rows:
        raise UsageError(f"{args.run_dir}: no setting has been trained yet")
    spec = group.resolved.spec
    print(f"{spec.agent} on {group.resolved.env_name}, {args.episodes} greedy episodes x "
          f"{spec.seeds} seed(s) per setting, best first:")
    for setting, chunk, r in sorted(rows, key=lambda row: -row[2].mean()):
        print(f"  setting {setting} (checkpoint after chunk {chunk}): return {r.mean():.2f} "
              f"+- {r.std():.2f}")
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


def report_teams(names: Sequence[str], team_returns) -> None:
    """Each team's mean +- std return over seeds and episodes (`team_returns` [seeds,
    episodes, K])."""
    for k, name in enumerate(names):
        r = team_returns[..., k]
        print(f"team {name}: return {r.mean():.1f} +- {r.std():.1f}")


def evaluate_host_run(args: argparse.Namespace, saved) -> int:
    """A gymnasium: run: greedy episodes in worker processes through the host loop."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrl_sys.envs.render import gymnasium_episode_frames, write_gif
    from jaxrl_sys.runtime import host

    resolved, env = saved.resolved, saved.env
    restored, record = saved.restore(args.chunk)
    agent_state = restored["agent_state"]
    policy = resolved.module.greedy_action(saved.agent)
    returns, lengths = host.evaluate(env, policy, agent_state, args.episodes, seed=args.seed)
    report(resolved.spec.agent, resolved.env_name, record["chunk"], args.episodes,
           resolved.seeds, returns[None], lengths[None])
    if args.render is not None:
        from jaxrl_sys.core.evaluation import stateful

        recurrent = stateful(policy)  # the one episode's memory is carried from step to step
        step_policy = jax.jit(lambda obs, step, memory: recurrent.step(
            agent_state, memory, obs, jnp.reshape(step == 0, (1,)),
            jax.random.fold_in(jax.random.PRNGKey(0), step)))
        memory = [recurrent.initial(1)]

        def act(obs, step):
            """The greedy action for one observation; keeps the memory after it."""
            action, memory[0] = step_policy(obs, np.int32(step), memory[0])
            return action

        frames = gymnasium_episode_frames(env, act, seed=args.seed)
        write_gif(frames, args.render)
        print(f"wrote {args.render} ({len(frames)} frames)")
    return 0


def render_episode(env, policy, agent_state, key, renderer) -> list:
    """Frames of one greedy episode, from the first observation to the last state (a
    recurrent policy's memory carried from step to step)."""
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.core.evaluation import stateful
    from jaxrl_sys.core.rollout import has_legal_actions

    policy = stateful(policy)
    reset = jax.jit(env.reset)
    step = jax.jit(env.step)

    @jax.jit
    def act(obs, state, memory, starts, k):
        """The greedy action for one observation, and the memory after it."""
        context = {"env_state": jax.tree.map(lambda x: x[None], state)}
        if has_legal_actions(env):  # a team's available actions
            context["legal"] = env.legal_actions(state)[None]
        actions, memory = policy.step(agent_state, memory, obs[None], starts, k, **context)
        return actions[0], memory

    reset_key, run_key = jax.random.split(key)
    obs, state = reset(reset_key)
    memory, starts = policy.initial(1), jnp.ones(1, bool)
    frames = [renderer.frame(state)]
    for t in range(env.spec.max_episode_steps):
        act_key, step_key = jax.random.split(jax.random.fold_in(run_key, t))
        action, memory = act(obs, state, memory, starts, act_key)
        starts = jnp.zeros(1, bool)
        obs, state, _, terminated, truncated, _ = step(step_key, state, action)
        if bool(terminated) or bool(truncated):  # the env has already reset: stop here
            break
        frames.append(renderer.frame(state))
    renderer.close()
    return frames


def main(argv: Optional[Sequence[str]] = None) -> int:
    from jaxrl_sys import agents
    from jaxrl_sys import envs
    from jaxrl_sys.envs.render import RenderError
    from jaxrl_sys.runtime.host import HostLoopError
    from jaxrl_sys.runtime.session import USER_ERRORS

    return guarded(lambda: evaluate_run(build_parser().parse_args(argv)),
                   USER_ERRORS + agents.USER_ERRORS + envs.USER_ERRORS + (RenderError,),
                   faults=(HostLoopError,))


def entry() -> None:
    """The `jaxrl-evaluate` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
