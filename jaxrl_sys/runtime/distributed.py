"""Many processes (hosts), one global mesh: `jax.distributed` set-up before JAX starts.

Every process runs the same program over the global mesh of all processes' devices; each
holds (and steps) the envs of its own devices. Processes are joined either explicitly
(`--coordinator HOST:PORT --num-processes P --process-id I`) or, when a launcher started
several tasks, by `jax.distributed.initialize()`'s own detection (SLURM, Open MPI).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import jax
import numpy as np
from jax.experimental import multihost_utils


class DistributedError(ValueError):
    """Inconsistent multi-process flags; the message is one line."""


@dataclasses.dataclass(frozen=True)
class ProcessGroup:
    """How this process joins the others; `num_processes == 1` is a single-process run."""

    coordinator: Optional[str] = None
    num_processes: int = 1
    process_id: int = 0
    auto: bool = False  # let jax.distributed.initialize detect the cluster

    @property
    def multi(self) -> bool:
        return self.auto or self.num_processes > 1


def launched_tasks() -> int:
    """Tasks a cluster launcher started for this job (1 when none is detected)."""
    for variable in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def process_group(coordinator: Optional[str], num_processes: Optional[int],
                  process_id: Optional[int]) -> ProcessGroup:
    """Check the flags: all three together, or none (then auto-detection under a launcher)."""
    given = [v is not None for v in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        raise DistributedError("--coordinator, --num-processes and --process-id go together")
    if not any(given):
        tasks = launched_tasks()
        return ProcessGroup(num_processes=tasks, auto=tasks > 1)
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit():
        raise DistributedError(f"--coordinator must be HOST:PORT, got {coordinator!r}")
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise DistributedError(
            f"need --num-processes >= 1 and 0 <= --process-id < --num-processes, got "
            f"{num_processes} and {process_id}"
        )
    return ProcessGroup(coordinator, num_processes, process_id)


def initialize(group: ProcessGroup, local_cpu_devices: Optional[int] = None) -> None:
    """Join the process group (before any JAX computation). On CPU, cross-process
    collectives use gloo and each process gets `local_cpu_devices` virtual devices."""
    if not group.multi:
        return
    if local_cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", local_cpu_devices)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if group.auto:
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(
            coordinator_address=group.coordinator,
            num_processes=group.num_processes,
            process_id=group.process_id,
        )


def is_main_process() -> bool:
    """Process 0 logs and prints; every process takes part in computation and checkpoints."""
    return jax.process_index() == 0


def broadcast_text(text: str) -> str:
    """Process 0's `text` on every process (e.g. the run directory it chose)."""
    if jax.process_count() == 1:
        return text
    data = np.zeros(1024, np.uint8)
    raw = text.encode("utf-8")[:1024]
    data[: len(raw)] = np.frombuffer(raw, np.uint8)
    shared = np.asarray(multihost_utils.broadcast_one_to_all(data))
    return bytes(shared[shared > 0].tolist()).decode("utf-8")
