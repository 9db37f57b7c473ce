"""The episodes a learning server has acknowledged, on disk before the acknowledgement.

An append-only file of records (an 8-byte length, then the episode in msgpack), each written
and fsynced before the `end` request that finished the episode is answered. (Steps of an
episode that never ends, `log_steps`' included, are not acknowledged experience: an episode
is learned from once it ends.)
After a crash the learner's last checkpoint says which logged steps it had learned from, and
the rest are fed to it again (`LearnerStatus.unlearned`), so no acknowledged step is lost. A
record cut short by the crash was never acknowledged and is ignored.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterator, Union

import msgspec
import numpy as np

from jaxrl_sys.serve import codec
from jaxrl_sys.serve.episodes import FinishedEpisode

LOG_FILE = "experience.log"
_LENGTH = struct.Struct("<Q")


def _packed(episode: FinishedEpisode) -> bytes:
    kind = codec.MSGPACK
    final = None if episode.final_obs is None else codec.pack_array(episode.final_obs, kind)
    return msgspec.msgpack.encode({
        "episode_id": episode.episode_id, "lane": episode.lane,
        "terminated": episode.terminated, "final_obs": final,
        "observations": codec.pack_array(episode.observations, kind),
        "actions": codec.pack_array(episode.actions, kind),
        "rewards": codec.pack_array(episode.rewards, kind),
        "extras": {k: codec.pack_array(v, kind) for k, v in episode.extras.items()}})


def _unpacked(data: bytes) -> FinishedEpisode:
    record = msgspec.msgpack.decode(data)
    array = codec.unpack_array
    final = record["final_obs"]
    return FinishedEpisode(
        record["episode_id"], array(record["observations"], "observations"),
        array(record["actions"], "actions"), array(record["rewards"], "rewards"),
        None if final is None else array(final, "final_obs"), record["terminated"],
        {k: array(v, k) for k, v in record["extras"].items()}, record["lane"])


class ExperienceLog:
    """The log in `run_dir`: `append` (durable when it returns) and `read` from an index."""

    def __init__(self, run_dir: Union[str, Path]):
        self.path = Path(run_dir) / LOG_FILE
        self.count = sum(1 for _ in self._records())
        self._file = open(self.path, "ab")
        self._file.truncate(self._valid_bytes)  # drop a record a crash cut short

    def _records(self) -> Iterator[bytes]:
        """The complete records, in order (sets `_valid_bytes` to where they end)."""
        self._valid_bytes = 0
        if not self.path.is_file():
            return
        with open(self.path, "rb") as f:
            while True:
                head = f.read(_LENGTH.size)
                if len(head) < _LENGTH.size:
                    return
                (size,) = _LENGTH.unpack(head)
                data = f.read(size)
                if len(data) < size:
                    return
                self._valid_bytes += _LENGTH.size + size
                yield data

    def append(self, episode: FinishedEpisode) -> int:
        """Write `episode` and sync it to disk; its index in the log."""
        data = _packed(episode)
        self._file.write(_LENGTH.pack(len(data)) + data)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.count += 1
        return self.count - 1

    def read(self, start: int = 0) -> Iterator[tuple[int, FinishedEpisode]]:
        """(index, episode) of the logged episodes from index `start` on."""
        for index, data in enumerate(self._records()):
            if index >= start:
                yield index, _unpacked(data)

    def steps(self) -> int:
        """Steps of every logged episode."""
        return int(sum(np.shape(e.actions)[0] for _, e in self.read()))

    def close(self) -> None:
        self._file.close()
