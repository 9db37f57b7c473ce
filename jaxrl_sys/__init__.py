"""What every agent shares, and the run layer: `from jaxrl_sys import RunSpec, run`.

The run layer's names are imported on first use, so that `import jaxrl_sys.<module>` stays
cheap and sets up no device.
"""

from __future__ import annotations

import importlib
from typing import Any

_RUN_LAYER = {
    "RunSpec": "jaxrl_sys.run_spec",
    "ResolvedRun": "jaxrl_sys.run_spec",
    "UsageError": "jaxrl_sys.run_spec",
    "resolve": "jaxrl_sys.run_spec",
    "load_spec": "jaxrl_sys.run_spec",
    "run": "jaxrl_sys.session",
    "Session": "jaxrl_sys.session",
    "RunOutcome": "jaxrl_sys.session",
    "TrainingStopped": "jaxrl_sys.session",
    "sweep": "jaxrl_sys.sweeps",
    "SweepOutcome": "jaxrl_sys.sweeps",
}

__all__ = sorted(_RUN_LAYER)


def __getattr__(name: str) -> Any:
    if name in _RUN_LAYER:
        return getattr(importlib.import_module(_RUN_LAYER[name]), name)
    raise AttributeError(f"module 'jaxrl_sys' has no attribute {name!r}")
