"""Where the host loop's actors and learner run: actor threads, actor devices, learner mesh.

Sebulba's placement (Podracer, Cleanba). Every process steps `num_envs / processes` envs,
split into `actor_threads` batches of consecutive global env ids, one per actor thread; thread
a acts on the a-th actor device (round robin). The learner is data-parallel over a 1-D mesh
"device" of the learner devices of every process: rollouts [T, B, ...] are split over it along
the env axis, parameters are replicated, gradients `pmean`-ed, exactly as in the device loop.

With `actor_devices` K < `devices` the first K/processes local devices act and the others
learn (Cleanba's split); with K = `devices` (the default) actors and learner share them.
Every env is named by its global id, so a run does not depend on how envs are split over
threads, devices or processes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxrl_sys.runtime.execution import DEVICE_AXIS, PlacementError

ENV_AXIS_SPEC = P(DEVICE_AXIS)  # leaves [B, ...] (replay rows, env ids) split over the learner
TIME_MAJOR_SPEC = P(None, DEVICE_AXIS)  # rollout leaves [T, B, ...]
REPLICATED = P()


@dataclasses.dataclass(frozen=True)
class HostLayout:
    """Counts of a host-loop placement; `check` refuses one that does not fit, touching no
    device (so a run is refused before anything is created)."""

    num_envs: int  # over all processes
    devices: int = 1  # over all processes
    actor_devices: Optional[int] = None  # None: actors share the learner's devices
    actor_threads: int = 1  # per process
    processes: int = 1

    @property
    def shared(self) -> bool:
        return self.actor_devices is None or self.actor_devices == self.devices

    @property
    def learner_devices(self) -> int:
        return self.devices if self.shared else self.devices - self.actor_devices

    @property
    def local_envs(self) -> int:
        return self.num_envs // self.processes

    @property
    def thread_envs(self) -> int:
        return self.local_envs // self.actor_threads

    def check(self) -> None:
        """PlacementError (one line) unless devices, threads and envs divide as needed."""
        if self.actor_threads < 1:
            raise PlacementError(f"actor_threads must be >= 1, got {self.actor_threads}")
        if self.devices < 1:
            raise PlacementError(f"devices must be >= 1, got {self.devices}")
        if self.actor_devices is not None and not 1 <= self.actor_devices <= self.devices:
            raise PlacementError(
                f"actor_devices={self.actor_devices} does not fit {self.devices} device(s): "
                f"give 1 .. {self.devices} ({self.devices} shares them with the learner)")
        for name, count in (("devices", self.devices),
                            ("actor_devices", self.actor_devices or self.devices)):
            if count % self.processes:
                raise PlacementError(f"{name}={count} does not divide over "
                                     f"{self.processes} processes")
        if self.num_envs % (self.processes * self.actor_threads):
            raise PlacementError(
                f"num_envs={self.num_envs} does not divide over {self.processes} process(es) x "
                f"{self.actor_threads} actor thread(s)")
        if self.num_envs % self.learner_devices:
            raise PlacementError(f"num_envs={self.num_envs} does not divide over "
                                 f"{self.learner_devices} learner device(s)")


@dataclasses.dataclass(frozen=True)
class HostPlacement:
    """A checked layout bound to this process's devices."""

    layout: HostLayout
    mesh: Mesh  # the learner devices of every process, axis "device"
    actor_devices: tuple[Any, ...]  # this process's
    env_offset: int  # this process's first global env id

    def thread_devices(self) -> list[Any]:
        """The device each actor thread acts on."""
        return [self.actor_devices[a % len(self.actor_devices)]
                for a in range(self.layout.actor_threads)]

    def thread_env_ids(self, thread: int) -> np.ndarray:
        """Global ids [B_thread] of the envs actor thread `thread` steps."""
        start = self.env_offset + thread * self.layout.thread_envs
        return np.arange(start, start + self.layout.thread_envs, dtype=np.int32)

    def sharding(self, spec: P) -> NamedSharding:
        return NamedSharding(self.mesh, spec)

    def local_learner_rows(self) -> list[tuple[Any, int, int]]:
        """(device, first, last + 1) of this process's learner devices, in rows of this
        process's envs (0 .. local_envs)."""
        rows = self.layout.num_envs // self.layout.learner_devices
        out = []
        for position, device in enumerate(self.mesh.devices.flat):
            if device.process_index == jax.process_index():
                first = position * rows - self.env_offset
                out.append((device, first, first + rows))
        return out


def place_host(layout: HostLayout) -> HostPlacement:
    """Bind `layout` to the devices JAX sees (after `request_devices` / `jax.distributed`)."""
    layout.check()
    processes = jax.process_count()
    if processes != layout.processes:
        raise PlacementError(f"layout for {layout.processes} processes in a run of {processes}")
    per_process = layout.devices // processes
    local = sorted(jax.local_devices(), key=lambda d: d.id)
    if per_process > len(local):
        raise PlacementError(f"asked for {layout.devices} devices but {len(local) * processes} "
                             f"{local[0].platform.upper()} device(s) exist")
    by_process: dict[int, list] = {}
    for device in sorted(jax.devices(), key=lambda d: (d.process_index, d.id)):
        by_process.setdefault(device.process_index, []).append(device)
    actors_per_process = (layout.actor_devices or layout.devices) // processes
    skip = 0 if layout.shared else actors_per_process
    learners = [d for p in sorted(by_process) for d in by_process[p][skip:per_process]]
    mesh = Mesh(np.asarray(learners), (DEVICE_AXIS,))
    return HostPlacement(layout, mesh, tuple(local[:actors_per_process]),
                         jax.process_index() * layout.local_envs)
