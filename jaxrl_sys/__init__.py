"""jaxrl_sys: `from jaxrl_sys import RunSpec, run` trains any registered agent on any env.

Layers, one folder each: `core` (primitives), `envs`, `agents`, `runtime` (the run machinery),
`tools` (benchmark, learning checks, arena) and `commands` (the console entry points). The
names below are imported on first use, so that `import jaxrl_sys.<module>` stays cheap and sets
up no device.
"""

from __future__ import annotations

from jaxrl_sys.core.lazy import lazy_exports

_RUN_LAYER = {
    "RunSpec": "jaxrl_sys.runtime.run_spec",
    "ResolvedRun": "jaxrl_sys.runtime.run_spec",
    "UsageError": "jaxrl_sys.runtime.run_spec",
    "resolve": "jaxrl_sys.api",
    "load_spec": "jaxrl_sys.runtime.run_spec",
    "run": "jaxrl_sys.api",
    "Session": "jaxrl_sys.runtime.session",
    "RunOutcome": "jaxrl_sys.runtime.session",
    "TrainingStopped": "jaxrl_sys.runtime.session",
    "sweep": "jaxrl_sys.api",
    "SweepOutcome": "jaxrl_sys.runtime.sweeps.results",
}

__all__ = sorted(_RUN_LAYER)


__getattr__, __dir__ = lazy_exports(__name__, _RUN_LAYER)
