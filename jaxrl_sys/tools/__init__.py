"""Tools over runs: benchmark suites and their references, learning checks, the arena."""
