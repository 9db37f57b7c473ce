"""The console entry points (`jaxrl-train`, `jaxrl-evaluate`, ...): the only layer that
wires agents and envs into the run machinery."""
