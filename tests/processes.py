"""Finding a run's processes in tests: every process started with a marker in its
environment (the run, its workers and what they started), wherever it was moved."""

from __future__ import annotations

from pathlib import Path


def marked_processes(marker: str) -> list[int]:
    """Pids of the live processes whose environment holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def command_line(pid: int) -> str:
    """A process's command line (empty once it has gone)."""
    try:
        return (Path(f"/proc/{pid}") / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return ""
