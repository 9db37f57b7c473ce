"""A run that starts from another run's learner (`jaxrl-train --init-from RUN_DIR`): the
latest checkpoint's agent state put into a fresh carry, whose envs, replay and key are the
new run's own. Offline-to-online fine-tuning is its use: an IQL or CQL run trained on a
dataset goes on with `--set online_rollout=N` and its dataset kept in the replay.

The saved arrays are read without the other run's template (it may have been placed on other
devices, or have had other envs and replay) and matched to this run's learner state by name,
shape and dtype; anything that does not fit is one line naming the first mismatch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Union

import jax
import numpy as np

from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.cli import UsageError


def _name(entry: Any) -> str:
    """The key a checkpoint saves one step of a tree path under."""
    for attribute in ("name", "key", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def _saved_leaf(saved: Any, path: tuple, source: Path) -> Any:
    """The saved array at `path` (a jax key path) in the nested dicts `saved`."""
    node = saved
    for entry in path:
        name = _name(entry)
        if isinstance(node, dict) and name in node:
            node = node[name]
        elif isinstance(node, (list, tuple)) and name.isdigit() and int(name) < len(node):
            node = node[int(name)]
        else:
            where = "/".join(_name(e) for e in path)
            raise UsageError(f"--init-from {source}: its learner state has no {where}; the two "
                             "runs' networks or optimisers differ")
    return node


def learner_from(source: Union[str, Path], template: Any) -> Any:
    """`template` (a fresh carry of this run, leaves [seeds, ...]) with its `agent_state`
    replaced by the latest checkpoint's of the run in `source`.

    Args:
        source: the run directory to start from.
        template: this run's fresh carry (`Loop.template()`).

    Returns:
        The carry to train from, each leaf placed as the template's.

    Raises:
        UsageError: the saved learner state does not fit this run's (seeds, networks,
            optimiser), one line.
    """
    source = Path(source)
    checkpointer = Checkpointer(source, create=False)
    try:
        saved = checkpointer.read_raw()
    finally:
        checkpointer.close()
    saved_agent = saved.get("agent_state") if isinstance(saved, dict) else None
    if saved_agent is None:
        raise UsageError(f"--init-from {source}: its checkpoint holds no learner state")

    def take(path: tuple, fresh: jax.Array) -> jax.Array:
        value = _saved_leaf(saved_agent, path, source)
        where = "/".join(_name(e) for e in path)
        if np.shape(value)[:1] != fresh.shape[:1]:
            raise UsageError(f"--init-from {source} trained {np.shape(value)[0]} seed(s); this "
                             f"run has {fresh.shape[0]} (--seeds {np.shape(value)[0]})")
        if np.shape(value) != fresh.shape or np.dtype(value.dtype) != fresh.dtype:
            raise UsageError(f"--init-from {source}: {where} is {value.dtype}"
                             f"{list(np.shape(value))}, this run's is {fresh.dtype}"
                             f"{list(fresh.shape)}; the two runs' networks differ")
        return jax.device_put(value, fresh.sharding)

    agent_state = jax.tree_util.tree_map_with_path(take, template.agent_state)
    return dataclasses.replace(template, agent_state=agent_state)
