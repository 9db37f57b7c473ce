"""Weights & Biases as one more sink of a run's metrics (`train.py --wandb PROJECT`).

Imported only when a run asks for W&B (wandb is an optional extra). The W&B run id is kept in
the run directory, so `--resume` continues the same W&B run; every metric is charted against
`env_steps`, so a resumed run's repeated chunks do not break W&B's step order. With
`WANDB_MODE=offline` the W&B run is written under the run directory (`wandb/`) for a later
`wandb sync`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

WANDB_ID_FILE = "wandb_id"
WANDB_DIR = "wandb"


class WandbSink:
    """Logs each metrics record of one run to a W&B run; `close` finishes it."""

    def __init__(self, run_dir: Union[str, Path], project: str, config: Mapping[str, Any]) -> None:
        """Start (or, on resume, continue) the W&B run of `run_dir` in `project`."""
        # wandb offers its LLM-tracing add-on when a module named `agents` is imported (ours is
        # not that one); the notice is noise here
        os.environ.setdefault("WANDB_DISABLE_WEAVE", "true")
        import wandb  # lazy: an optional extra, imported once a run asks for W&B

        run_dir = Path(run_dir)
        id_file = run_dir / WANDB_ID_FILE
        run_id = id_file.read_text(encoding="utf-8").strip() if id_file.is_file() else ""
        if not run_id:
            run_id = uuid.uuid4().hex[:12]
            id_file.write_text(run_id + "\n", encoding="utf-8")
        self._run = wandb.init(project=project, name=run_dir.name, id=run_id, resume="allow",
                               dir=str(run_dir), config=dict(config),
                               settings=wandb.Settings(console="off", silent=True))
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def log(self, record: Mapping[str, Optional[Union[int, float, bool]]]) -> None:
        """One record (env_steps and scalars; None, a non-finite value, is left out)."""
        self._run.log({key: value for key, value in record.items() if value is not None})

    def close(self) -> None:
        """Finish the W&B run (flushes it; offline: the files are complete)."""
        self._run.finish()
