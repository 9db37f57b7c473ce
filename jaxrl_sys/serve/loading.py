"""A run directory's policy made ready to serve, and the same program rebuilt from the run's
record on a client (local inference), checked against the server's manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import jax

from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun, RunSpec, read_run_record, resolve
from jaxrl_sys.runtime.session import open_run
from jaxrl_sys.serve.program import (Manifest, PolicyProgram, ServedRun, action_description,
                                     actor_template, exploring_acting, greedy_acting,
                                     policy_template)


class ServeError(Exception):
    """A run that cannot be served, or a client's program that differs from the server's;
    one line."""


def build_program(resolved: ResolvedRun, agent: Any, max_batch: int,
                  used: Optional[tuple[int, ...]] = None, learning: bool = False) -> PolicyProgram:
    """The compiled act of `resolved`'s greedy policy (or, `learning`, of the host loop's
    exploring act on the actor parameters), or ServeError if it cannot be served (teams,
    two-player games, a policy that needs the env's own state)."""
    spec = agent.spec
    if spec.num_agents > 1 or spec.num_players > 1:
        kind = "a team" if spec.num_agents > 1 else "a two-player game"
        raise ServeError(f"{resolved.env_name} is {kind}: the server acts for single-agent "
                         "envs only")
    if learning:
        fns = resolved.module.host_fns(agent)
        if fns.initial_memory is not None:
            raise ServeError("a learning server takes feed-forward policies only (memory=none)")
        acting, template = exploring_acting(fns), actor_template(fns)
    else:
        acting = greedy_acting(resolved.module.greedy_action(agent))
        template = policy_template(resolved.module, agent, resolved.host)
    try:
        return PolicyProgram(acting, template, spec.obs_shape, spec.obs_dtype, max_batch, used)
    except (TypeError, AttributeError) as error:
        raise ServeError(f"{resolved.spec.agent}'s policy on {resolved.env_name} needs more than "
                         f"an observation to act ({type(error).__name__}), so it cannot be "
                         "served") from None


def served_run(run_dir: Union[str, Path], load_agent: Callable[[str], Any],
               registry: EnvRegistry, *, chunk: Optional[int] = None, seed_index: int = 0,
               max_batch: int = 64) -> ServedRun:
    """The policy of `run_dir`'s checkpoint (the latest, or after `chunk`) for seed
    `seed_index` of the run, its leaves on device."""
    saved = open_run(run_dir, load_agent, registry)
    resolved = saved.resolved
    if not 0 <= seed_index < len(resolved.seeds):
        raise ServeError(f"--seed-index {seed_index}: the run has {len(resolved.seeds)} seed(s)")
    program = build_program(resolved, saved.agent, max_batch)
    carry, saved_at = saved.restore(chunk)
    if resolved.host:
        state = carry["agent_state"]
    else:
        state = jax.tree.map(lambda x: x[seed_index], carry.agent_state)
    shapes = tuple(tuple(x.shape) for x in jax.tree.leaves(state))
    if shapes != program.manifest.shapes:
        raise ServeError(f"{run_dir}: the checkpoint's agent state does not match "
                         f"{resolved.spec.agent}'s policy ({len(shapes)} leaves against "
                         f"{len(program.manifest.shapes)})")
    record = dict(read_run_record(run_dir), chunk=int(saved_at["chunk"]), seed_index=seed_index)
    discrete, num_actions, action_shape = action_description(saved.agent.spec)
    return ServedRun(program, program.leaves_of(state), record, program.obs_shape,
                     str(program.obs_dtype), discrete, num_actions, action_shape)


def rebuilt_program(record: dict, manifest: Manifest, load_agent: Callable[[str], Any],
                    registry: EnvRegistry, max_batch: int, learning: bool = False) -> PolicyProgram:
    """The server's program rebuilt from its run's record (a local-inference client's; a
    learning server's exploring one with `learning`), or ServeError if it differs from the
    server's `manifest`."""
    resolved = resolve(RunSpec.from_dict(record["spec"]), load_agent, registry,
                       saved_record=record)
    _, agent = resolved.build(registry)
    program = build_program(resolved, agent, max_batch, used=manifest.used, learning=learning)
    if program.manifest != manifest:
        raise ServeError(f"this installation builds {resolved.spec.agent}'s policy on "
                         f"{resolved.env_name} differently from the server's (another "
                         "jaxrl_sys version?): use inference='remote'")
    return program
