"""Checkpoints of a run's whole state with orbax: written atomically, the last k kept.

What is saved is the driver's `Carry` (agent state: parameters, optimiser state, counters;
env state: the envs and, unless left out, their replay rows; the run's RNG key) plus a small
JSON record (the chunk it follows, and whatever the caller adds). Restoring it into a template
carry of the same run gives back the same arrays with the template's shardings, so a resumed
run computes exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Optional, Union

import jax

from jaxrl_sys.core.types import PyTree

CHECKPOINT_DIR = "checkpoints"


class CheckpointError(ValueError):
    """A missing or unreadable checkpoint; the message is one line."""


def _without_replay(carry: PyTree) -> PyTree:
    """`carry` with its env state's replay rows replaced by None (if it has any); a host-loop
    carry (a dict) without its "replay"."""
    if isinstance(carry, dict):
        return {k: v for k, v in carry.items() if k != "replay"}
    env_state = getattr(carry, "env_state", None)
    if env_state is None or not hasattr(env_state, "replay"):
        return carry
    return dataclasses.replace(carry, env_state=env_state.replace(replay=None))


def _with_replay_of(carry: PyTree, template: PyTree) -> PyTree:
    """`carry` (saved without replay) with the template's (fresh, empty) replay put back."""
    if isinstance(carry, dict):
        return {**carry, **({"replay": template["replay"]} if "replay" in template else {})}
    env_state = getattr(carry, "env_state", None)
    if env_state is None or not hasattr(env_state, "replay"):
        return carry
    return dataclasses.replace(carry, env_state=env_state.replace(replay=template.env_state.replay))


# what orbax says when the saved tree and the one asked for differ (by kind of difference)
LAYOUT_MISMATCH = ("tree structures do not match", "Structure mismatch")


class Checkpointer:
    """Save and restore one run's checkpoints under `run_dir/checkpoints/<chunk>/`."""

    def __init__(self, run_dir: Union[str, Path], keep: int = 3, save_replay: bool = True,
                 create: bool = True) -> None:
        import orbax.checkpoint as ocp  # lazy: ~1.5 s; RunSpec's checks need only the errors

        self.directory = Path(run_dir).absolute() / CHECKPOINT_DIR
        if not create and not self.directory.is_dir():
            raise CheckpointError(f"no checkpoints in {Path(run_dir)}")
        self.save_replay = save_replay
        self._ocp = ocp
        self._manager = ocp.CheckpointManager(
            self.directory,
            item_handlers={"state": ocp.StandardCheckpointHandler(),
                           "record": ocp.JsonCheckpointHandler()},
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=create, enable_async_checkpointing=False
            ),
        )

    def save(self, chunk: int, carry: PyTree, record: dict) -> float:
        """Write the carry after `chunk` with a JSON `record`; returns the seconds it took."""
        ocp = self._ocp
        start = time.perf_counter()
        state = carry if self.save_replay else _without_replay(carry)
        record = {**record, "chunk": chunk, "saved_replay": self.save_replay}
        self._manager.save(
            chunk,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), record=ocp.args.JsonSave(record)
            ),
            force=True,
        )
        self._manager.wait_until_finished()
        return time.perf_counter() - start

    def latest_chunk(self) -> Optional[int]:
        return self._manager.latest_step()

    def read_record(self, chunk: Optional[int] = None) -> dict:
        """The JSON record of the checkpoint after `chunk` (default: the latest) alone: what
        a caller needs to build the template (a halving run's members) before `restore`."""
        chunk = self.latest_chunk() if chunk is None else chunk
        if chunk is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        return self._manager.restore(
            chunk, args=self._ocp.args.Composite(record=self._ocp.args.JsonRestore())).record

    def restore(self, template: PyTree, chunk: Optional[int] = None) -> tuple[PyTree, dict]:
        """The carry saved after `chunk` (default: the latest) shaped and sharded like
        `template`, and its record. Raises `CheckpointError` if there is none or it is
        unreadable."""
        ocp = self._ocp
        chunk = self.latest_chunk() if chunk is None else chunk
        if chunk is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        where = self.directory / str(chunk)
        try:
            record = self._manager.restore(
                chunk, args=ocp.args.Composite(record=ocp.args.JsonRestore())
            ).record
            saved_replay = bool(record.get("saved_replay", True))
            target = template if saved_replay else _without_replay(template)
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
            state = self._manager.restore(
                chunk, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
            ).state
        except Exception as error:  # orbax raises many kinds for damaged files
            if any(words in str(error) for words in LAYOUT_MISMATCH):
                raise CheckpointError(
                    f"cannot restore checkpoint {where}: its state is laid out otherwise than "
                    "this version of the agent builds (saved by another jaxrl_sys version?)"
                ) from None
            message = " ".join(str(error).split())[:300]
            raise CheckpointError(
                f"cannot restore checkpoint {where}: {type(error).__name__}: {message}"
            ) from None
        if not saved_replay:
            state = _with_replay_of(state, template)
        return state, record

    def read_raw(self, chunk: Optional[int] = None) -> dict:
        """The saved arrays as nested dicts, all on this process's first device, without a
        template: for inspection and comparison, whatever devices the run used."""
        ocp = self._ocp
        chunk = self.latest_chunk() if chunk is None else chunk
        if chunk is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        metadata = self._manager.item_metadata(chunk)["state"]
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        abstract = jax.tree.map(
            lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=device), metadata,
            is_leaf=lambda m: hasattr(m, "shape") and hasattr(m, "dtype"),
        )
        return self._manager.restore(
            chunk, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
        ).state

    def close(self) -> None:
        self._manager.close()

    def size_bytes(self, chunk: Optional[int] = None) -> int:
        """Bytes on disk of one checkpoint (default: the latest)."""
        chunk = self.latest_chunk() if chunk is None else chunk
        root = self.directory / str(chunk)
        return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())

