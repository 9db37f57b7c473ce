"""Benchmark the shipped defaults against published returns: `python scripts/benchmark.py --suite minatar`.

A thin wrapper over the `jaxrl-benchmark` entry point (`jaxrl_sys.commands.benchmark`), for use inside the
repository."""

from jaxrl_sys.commands.benchmark import entry

if __name__ == "__main__":
    entry()
