"""Primitives that know nothing of runs: types and the agent protocol, returns, value
transforms, distributions, networks, replay, collectives, rollouts, observation statistics."""
