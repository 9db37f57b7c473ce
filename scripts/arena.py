"""Play a trained board-game agent against an opponent: `python scripts/arena.py RUN_DIR

A thin wrapper over the `jaxrl-arena` entry point (`jaxrl_sys.commands.arena`), for use inside the
repository."""

from jaxrl_sys.commands.arena import entry

if __name__ == "__main__":
    entry()
