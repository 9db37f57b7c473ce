"""Datasets in Minari's format, written and read with Minari itself (`minari[hdf5]`).

A dataset lives at `ROOT/<dataset id>/data/` (Minari's layout under `MINARI_DATASETS_PATH`):
its metadata and its episodes (observations [T + 1, ...], actions, rewards, terminations and
truncations [T]). Besides Minari's own fields the metadata keeps, under `jaxrl_sys`, the env
this package names the data by and how the data was made, so an offline run can evaluate in
the same env. Datasets made elsewhere load the same way; they name no env of ours, and the
run's `--env` decides.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from jaxrl_sys.core.types import Box, EnvSpec
from jaxrl_sys.datasets.recording import Episode

METADATA_KEY = "jaxrl_sys"  # our part of a dataset's metadata
# Minari's ids, with the version it needs to read one back: letters, digits, "-" and "_"
DATASET_ID = re.compile(r"([-\w][-\w/]*[-\w]/)?[-\w]+?-v\d+")


class DatasetError(ValueError):
    """A dataset that cannot be read or written (a missing path, a malformed id, an existing
    dataset); the message is one line."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A dataset's episodes (host arrays) and what it says about itself."""

    episodes: list[Episode]
    env_name: Optional[str]  # the env this package recorded it in (None: made elsewhere)
    metadata: dict[str, Any]  # Minari's metadata, with ours under METADATA_KEY

    @property
    def total_steps(self) -> int:
        """Steps over all episodes."""
        return sum(len(e) for e in self.episodes)


def check_dataset_id(dataset_id: str) -> None:
    """DatasetError unless `dataset_id` is a Minari id: `(namespace/)name-v<version>`."""
    if not DATASET_ID.fullmatch(dataset_id):
        raise DatasetError(f"dataset id {dataset_id!r} is not of Minari's form "
                           "(namespace/)name-v<version>, e.g. cartpole-expert-v0")


@contextlib.contextmanager
def _datasets_root(root: Path) -> Iterator[None]:
    """Minari's datasets root set to `root` for the block (Minari reads it from the
    environment), the caller's value restored after."""
    before = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = before


def gymnasium_spaces(spec: EnvSpec) -> tuple[Any, Any]:
    """The Gymnasium observation and action spaces Minari records for `spec` (integer and
    bool observations bounded by their dtype)."""
    from gymnasium import spaces

    dtype = np.dtype(spec.obs_dtype)
    if dtype == np.bool_:
        low, high = 0, 1
    elif np.issubdtype(dtype, np.integer):
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
    else:
        low, high = -np.inf, np.inf
    observation = spaces.Box(low, high, spec.obs_shape, dtype)
    if isinstance(spec.action_space, Box):
        action = spaces.Box(np.asarray(spec.action_space.low, np.float32),
                            np.asarray(spec.action_space.high, np.float32),
                            spec.action_space.shape, np.float32)
    else:
        action = spaces.Discrete(spec.action_space.n)
    return observation, action


def write_dataset(root: Union[str, Path], dataset_id: str, episodes: Sequence[Episode],
                  spec: EnvSpec, env_name: str, made_by: dict[str, Any],
                  description: str) -> Path:
    """Write `episodes` as Minari dataset `dataset_id` under `root` (created if needed) with
    Minari's own writer; returns the dataset's directory.

    Args:
        root: the datasets root (Minari's `MINARI_DATASETS_PATH`).
        dataset_id: the Minari id, `(namespace/)name-v<version>`.
        episodes: the episodes.
        spec: the env's spec (the spaces Minari records).
        env_name: this package's name of the env (kept in the metadata).
        made_by: how the data was made (the run, checkpoint, policy), kept in the metadata.
        description: one line for Minari's description field.

    Returns:
        `root/dataset_id`.
    """
    import minari
    from minari.data_collector import EpisodeBuffer

    check_dataset_id(dataset_id)
    root = Path(root).absolute()
    target = root / dataset_id
    if target.exists():
        raise DatasetError(f"{target} already exists: pick another --name or --out")
    if any(len(e) == 0 for e in episodes) or not episodes:
        raise DatasetError("a dataset needs at least one episode, each of at least one step")
    observation_space, action_space = gymnasium_spaces(spec)
    buffers = [EpisodeBuffer(id=i, observations=e.observations, actions=e.actions,
                             rewards=list(e.rewards), terminations=list(e.terminations),
                             truncations=list(e.truncations), infos={})
               for i, e in enumerate(episodes)]
    target.parent.mkdir(parents=True, exist_ok=True)
    # written under a scratch root beside it and moved into place whole: an interrupted
    # write leaves no half-written dataset for a reader (or a rerun) to find
    scratch = Path(tempfile.mkdtemp(prefix=".writing-", dir=target.parent))
    try:
        with _datasets_root(scratch), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # Minari's notes on optional fields
            dataset = minari.create_dataset_from_buffers(
                dataset_id, buffers, observation_space=observation_space,
                action_space=action_space, algorithm_name=str(made_by.get("agent", "")),
                author="jaxrl_sys", description=description, data_format="hdf5",
                jpeg_encoding=False)
            dataset.storage.update_metadata({METADATA_KEY: {"env": env_name, **made_by}})
        (scratch / dataset_id).rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def dataset_directory(path_or_id: Union[str, Path]) -> Path:
    """The directory holding a dataset's `data/`: `path_or_id` itself (or its parent, when it
    names the `data/` directory), else a dataset id under Minari's datasets root
    (`MINARI_DATASETS_PATH`, by default ~/.minari/datasets). Nothing is downloaded."""
    path = Path(path_or_id)
    if (path / "data").is_dir():
        return path
    if path.name == "data" and path.is_dir():
        return path.parent
    root = Path(os.environ.get("MINARI_DATASETS_PATH",
                               Path.home() / ".minari" / "datasets"))
    if DATASET_ID.fullmatch(str(path_or_id)) and (root / str(path_or_id) / "data").is_dir():
        return root / str(path_or_id)
    raise DatasetError(f"no Minari dataset at {path_or_id} (a dataset directory with data/ "
                       f"in it, or a dataset id under {root})")


def read_dataset(path_or_id: Union[str, Path]) -> Dataset:
    """A Minari dataset's episodes and metadata, read with Minari's own reader.

    Args:
        path_or_id: a dataset directory, or a Minari dataset id already on disk.

    Returns:
        The dataset; flat Box observations and Discrete or Box actions only.
    """
    from minari import MinariDataset

    directory = dataset_directory(path_or_id)
    try:
        dataset = MinariDataset(directory / "data")
    except Exception as error:  # Minari raises many kinds for unreadable data
        raise DatasetError(f"{directory}: not a readable Minari dataset "
                           f"({type(error).__name__}: {error})") from None
    episodes = []
    try:
        for data in dataset.iterate_episodes():
            if not all(isinstance(x, np.ndarray) for x in (data.observations, data.actions)):
                raise DatasetError(f"{directory}: dictionary or tuple observations or actions "
                                   "are not supported; arrays only")
            if len(data.rewards) == 0:
                raise DatasetError(f"{directory}: episode {data.id} has no steps")
            episodes.append(Episode(
                observations=np.asarray(data.observations), actions=np.asarray(data.actions),
                rewards=np.asarray(data.rewards, np.float32),
                terminations=np.asarray(data.terminations, bool),
                truncations=np.asarray(data.truncations, bool)))
    except DatasetError:
        raise
    except Exception as error:  # a corrupt file fails in many ways while it is read
        raise DatasetError(f"{directory}: unreadable episodes ({type(error).__name__}: "
                           f"{error})") from None
    if not episodes:
        raise DatasetError(f"{directory}: the dataset has no episodes")
    metadata = dict(dataset.storage.metadata)
    ours = metadata.get(METADATA_KEY) or {}
    return Dataset(episodes, ours.get("env"), metadata)
