"""Check that every promised (agent, env) pair learns on many seeds under every CPU code path.

A thin wrapper over the `jaxrl-check-learning` entry point (`jaxrl_sys.commands.check_learning`), for use inside the
repository."""

from jaxrl_sys.commands.check_learning import entry

if __name__ == "__main__":
    entry()
