"""Per-run logging for the training driver: a JSONL file, TensorBoard events, a progress bar and
any extra sinks (W&B: jaxrl_sys/wandb_log.py).

The driver calls `RunLogger.log` once per compiled chunk, on the host, so nothing here runs inside
compiled code. Steps/s is the chunk's own time where the caller gives it (`seconds`, `at`: the
driver times each chunk from its start to its end on the device, as the host may fetch two
chunks' metrics back to back); otherwise it is measured between calls, and `reset_clock` keeps
compile time out of it.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Optional, Protocol, Sequence, Union

import numpy as np
from tqdm import tqdm

Scalar = Union[int, float, bool, None]

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
TB_DIR = "tb"
_RESERVED = ("env_steps", "wall_time", "steps_per_second")
_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


class MetricSink(Protocol):
    """Somewhere else a run's metrics go (e.g. W&B): one record per chunk, then close."""

    def log(self, record: Mapping[str, Scalar]) -> None: ...

    def close(self) -> None: ...


def _to_scalar(name: str, value: Any) -> Scalar:
    """Convert a Python/numpy/JAX scalar to a JSON-ready value; non-finite floats become None."""
    if value is None or isinstance(value, (bool, int)):
        return value
    array = np.asarray(value)
    if array.size != 1:
        raise TypeError(f"metric '{name}' must be a scalar, got shape {array.shape}")
    item = array.reshape(()).item()
    if isinstance(item, (bool, int)):
        return item
    item = float(item)
    return item if math.isfinite(item) else None


def format_rate(steps_per_second: float) -> str:
    """Format a rate compactly for the progress bar, e.g. 312000 -> '312k/s'."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if steps_per_second >= scale:
            return f"{steps_per_second / scale:.3g}{suffix}/s"
    return f"{steps_per_second:.3g}/s"


class RunLogger:
    """Writes one run's metrics to `metrics.jsonl`, TensorBoard (`tb/`), a tqdm progress bar and
    any extra sinks."""

    def __init__(
        self,
        run_dir: Union[str, Path],
        *,
        total_steps: int,
        config: Optional[dict] = None,
        progress: bool = True,
        tensorboard: bool = True,
        sinks: Sequence[MetricSink] = (),
    ) -> None:
        """Create the run directory and open the outputs; `config` is written to config.json.
        Every record also goes to each of `sinks`, which `close` closes."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.total_steps = int(total_steps)
        if config is not None:
            text = json.dumps(config, indent=2)
            (self.run_dir / CONFIG_FILE).write_text(text + "\n", encoding="utf-8")
        self._file = open(self.run_dir / METRICS_FILE, "a", buffering=1, encoding="utf-8")
        self._writer = None
        if tensorboard:
            from tensorboardX import SummaryWriter  # lazy: ~0.7 s; evaluate.py, --help skip it

            self._writer = SummaryWriter(str(self.run_dir / TB_DIR), flush_secs=10)
        self._sinks = tuple(sinks)
        self._bar = None
        if progress:
            self._bar = tqdm(
                total=self.total_steps,
                unit="step",
                unit_scale=True,
                mininterval=0.5,
                dynamic_ncols=True,
                file=sys.stderr,
                bar_format=_BAR_FORMAT,
            )
        self._start = time.perf_counter()
        self._clock_time = self._start  # when the timed period began (start or reset_clock)
        self._clock_steps = 0  # env steps at the beginning of the timed period
        self._last_time = self._start
        self._last_steps = 0
        self._last_metrics: dict[str, Scalar] = {}
        self._closed = False

    def reset_clock(self, env_steps: Optional[int] = None, elapsed: float = 0.0) -> None:
        """Restart steps/s timing, e.g. to leave compilation out or on resume.

        The next `log` measures from `elapsed` seconds before now (training that has already
        run) and from `env_steps` (default: the last logged).
        """
        now = time.perf_counter() - elapsed
        steps = self._last_steps if env_steps is None else int(env_steps)
        self._clock_time = self._last_time = now
        self._clock_steps = self._last_steps = steps
        if self._bar is not None and env_steps is not None:
            self._bar.n = self._bar.last_print_n = steps
            self._bar.refresh()

    def log(self, env_steps: int, metrics: Mapping[str, Any], *, seconds: Optional[float] = None,
            at: Optional[float] = None) -> None:
        """Record `metrics` at `env_steps`: one JSONL line, TensorBoard scalars and the bar.

        `seconds`: how long the steps since the last record took (default: the time since
        it); `at`: the `time.perf_counter()` they ended at, the record's wall time (default:
        now)."""
        if self._closed:
            raise RuntimeError("RunLogger.log called after close()")
        env_steps = int(env_steps)
        now = time.perf_counter() if at is None else at
        elapsed = now - self._last_time if seconds is None else seconds
        rate = (env_steps - self._last_steps) / elapsed if elapsed > 0 else None
        record: dict[str, Scalar] = {
            "env_steps": env_steps,
            "wall_time": now - self._start,
            "steps_per_second": rate,
        }
        values = {k: _to_scalar(k, v) for k, v in metrics.items() if k not in _RESERVED}
        record.update(values)
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        if self._writer is not None:
            for key, value in record.items():
                # None: nothing measured (no episode ended in the chunk): no point, not a NaN
                if key != "env_steps" and value is not None:
                    self._writer.add_scalar(key, float(value), global_step=env_steps)
        for sink in self._sinks:
            sink.log(record)
        self._advance_bar(env_steps, rate, values)
        self._last_time, self._last_steps, self._last_metrics = now, env_steps, values

    def _advance_bar(self, env_steps: int, rate: Optional[float],
                     values: Mapping[str, Scalar]) -> None:
        """Move the progress bar to `env_steps` with a steps/s, return and (for games)
        greedy win/draw/loss postfix."""
        if self._bar is None:
            return
        parts = []
        if rate is not None:
            parts.append(format_rate(rate))
        mean_return = values.get("mean_return")
        if isinstance(mean_return, (int, float)) and not isinstance(mean_return, bool):
            parts.append(f"return={mean_return:.4g}")
        outcomes = [values.get(f"eval_{k}") for k in ("win", "draw", "loss")]
        if all(isinstance(v, float) for v in outcomes):
            parts.append("W/D/L=" + "/".join(f"{v:.0%}" for v in outcomes))
        self._bar.set_postfix_str(" ".join(parts), refresh=False)
        delta = env_steps - self._bar.n
        if delta > 0:
            self._bar.update(delta)
        else:
            self._bar.n = env_steps
            self._bar.refresh()

    def close(self) -> dict[str, Any]:
        """Flush and close every output; return a summary of the run (safe to call twice)."""
        now = time.perf_counter()
        timed = now - self._clock_time
        rate = (self._last_steps - self._clock_steps) / timed if timed > 0 else None
        summary = {
            "env_steps": self._last_steps,
            "wall_time": now - self._start,
            "steps_per_second": rate,
            "metrics": dict(self._last_metrics),
        }
        if not self._closed:
            self._closed = True
            self._file.close()
            if self._writer is not None:
                self._writer.close()
            for sink in self._sinks:
                sink.close()
            if self._bar is not None:
                self._bar.close()
        return summary

    def __enter__(self) -> RunLogger:
        """Use the logger in a `with` block that closes it on exit."""
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        """Close the logger; exceptions propagate."""
        self.close()


def _sanitise(name: str) -> str:
    """Make a name safe for a directory: runs of other characters than [A-Za-z0-9._-] become '-'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "x"


def _timestamp() -> str:
    """Local time as YYYYmmdd-HHMMSS, the run directory's suffix."""
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def make_run_dir(root: Union[str, Path], agent: str, env: str) -> Path:
    """Create and return a new `root/<agent>_<env>_<YYYYmmdd-HHMMSS>[-N]` directory.

    Creation is atomic (mkdir without exist_ok), so concurrent runs never share a directory.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    base = f"{_sanitise(agent)}_{_sanitise(env)}_{_timestamp()}"
    suffix = 0
    while True:
        path = root / (base if suffix == 0 else f"{base}-{suffix}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            suffix += 1


def read_jsonl(path: Union[str, Path]) -> list[dict[str, Any]]:
    """Read a metrics JSONL file, skipping a truncated last line (run still writing, or killed)."""
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as err:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: invalid JSON line: {err}") from err
    return records
