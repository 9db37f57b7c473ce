"""Learning curves to PNG: `python scripts/plot.py RUN_DIR [RUN_DIR ...] --out curves.png`.

A thin wrapper over the `jaxrl-plot` entry point (`jaxrl_sys.commands.plot`), for use inside the
repository."""

from jaxrl_sys.commands.plot import entry

if __name__ == "__main__":
    entry()
