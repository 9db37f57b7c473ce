"""Record a run's policy to a Minari dataset: `python scripts/record.py RUN_DIR --episodes 100`.

A thin wrapper over the `jaxrl-record` entry point (`jaxrl_sys.commands.record`), for use inside
the repository."""

from jaxrl_sys.commands.record import entry

if __name__ == "__main__":
    entry()
