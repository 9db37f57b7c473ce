"""Train an agent: `python scripts/train.py --agent ppo --env CartPole-v1 --seeds 8`.

A thin wrapper over the `jaxrl-train` entry point (`jaxrl_sys.commands.train`), for use inside the
repository."""

from jaxrl_sys.commands.train import entry

if __name__ == "__main__":
    entry()
