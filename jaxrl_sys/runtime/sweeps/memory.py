"""A sweep's memory checked before compiling: each row's carry measured from shapes only,
against the memory the rows may use (an accelerator's limit, else free RAM)."""

from __future__ import annotations

import os
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.runtime.execution import placement_fns
from jaxrl_sys.runtime.sweeps.keys import SweepError
from jaxrl_sys.runtime.sweeps.plan import Group

MEMORY_FRACTION = 0.8  # of the memory available that a group's rows may take


def row_bytes(module: Any, env: Any, config: Any) -> int:
    """Bytes of one row's carry (agent state with its replay, env state), from shapes only."""
    init_fn, _ = placement_fns(module.make(env, config))
    shapes = jax.eval_shape(init_fn, jax.random.PRNGKey(0),
                            jnp.arange(config.num_envs, dtype=jnp.int32))
    return int(sum(np.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(shapes)))


def available_bytes() -> int:
    """Memory the rows may use: the first device's limit on an accelerator, else free RAM."""
    device = jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"]) * len(jax.devices())
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(groups: Sequence[Group], seeds: int, module: Any, env: Any) -> None:
    """Refuse, before compiling, a group whose rows' state would not fit in memory (three
    copies of the carry: the state, its donated successor and the step's temporaries)."""
    limit = available_bytes() * MEMORY_FRACTION
    for group in groups:
        rows = len(group.members) * seeds
        need = 3 * rows * row_bytes(module, env, group.config)
        if need > limit:
            raise SweepError(
                f"group {group.index + 1}: {rows} rows need about {need / 2**30:.1f} GiB; "
                f"{limit / 2**30:.1f} GiB can be used here: sweep fewer settings or seeds, or "
                f"make the replay buffer smaller")
