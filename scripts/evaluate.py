"""Evaluate a run's checkpoint: `python scripts/evaluate.py RUN_DIR --episodes 32`.

A thin wrapper over the `jaxrl-evaluate` entry point (`jaxrl_sys.commands.evaluate`), for use inside the
repository."""

from jaxrl_sys.commands.evaluate import entry

if __name__ == "__main__":
    entry()
