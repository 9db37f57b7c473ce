"""The host loop: envs not written in JAX run in worker processes while the device acts and learns.

Sebulba-style pipeline with the agents' own jitted functions:

    actor threads: params(version) -> act on the actor device -> step own workers -> ...
                   T steps later: the rollout's rows go to the learner devices -> queue
    learner (the calling thread): every thread's rollout -> learn, data-parallel over the
                   learner devices -> publish params(version + 1) to the actor devices

Rollout i is collected with exactly the parameters of version max(0, i - staleness), the
version made by learning from rollouts 0 .. i-staleness-1. Staleness 0 alternates acting and
learning (on-policy, like the on-device loop); staleness 1 collects rollout i while the learner
learns from rollout i-1. Because the version is fixed and not "the newest available", a run
does not depend on thread timing: the same seed gives the same run at any staleness.

With several actor threads (`HostLayout.actor_threads`) each steps its own batch of envs
(consecutive global ids) on its actor device, so that stepping one batch overlaps inference on
another; rollout i of every thread uses the same version, and the learner learns from their
rows together, data-parallel over the learner devices (`placement`).
Actions are drawn from per-env keys of the envs' global ids, so the run is the same for any
number of threads, devices or processes.

This package knows neither agents nor envs: an agent supplies `HostFns`, an env a `HostEnv`.
The modules, each one job:

    placement   where actors and learner run: actor threads, actor devices, learner mesh
    actors      actor threads acting with the parameter version a fixed staleness behind
    episodes    returns and lengths of the episodes as they finish
    workers     the env worker processes: started, failures named, reaped
    learner     `learn` data-parallel over the learner mesh, rollouts assembled for it
    loop        `train` (and `initial_carry`): acting and learning together, chunks, checkpoints
    evaluation  greedy episodes of a policy in worker processes

The names below are imported from their modules on first use, so that `placement`, which
`RunSpec` checks read, can be imported without the loop's own imports (Flax among them).
"""

from __future__ import annotations

from jaxrl_sys.core.lazy import lazy_exports

_PUBLIC = {
    "HostEnv": ".actors",
    "HostLoopConfig": ".actors",
    "EpisodeTracker": ".episodes",
    "evaluate": ".evaluation",
    "initial_carry": ".loop",
    "train": ".loop",
    "HostLayout": ".placement",
    "HostPlacement": ".placement",
    "place_host": ".placement",
    "HostLoopError": ".workers",
    "describe_env_error": ".workers",
}

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)
