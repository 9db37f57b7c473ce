"""Serve a run's policy over HTTP: `python scripts/serve.py RUN_DIR --port 8000`.

A thin wrapper over the `jaxrl-serve` entry point (`jaxrl_sys.commands.serve`), for use inside the
repository."""

from jaxrl_sys.commands.serve import entry

if __name__ == "__main__":
    entry()
