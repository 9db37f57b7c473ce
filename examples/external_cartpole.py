"""An application outside the process: Gymnasium CartPole-v1 stepped here, actions from a
policy server through `PolicyClient` only.

    jaxrl-serve --learn --agent ppo --env gymnasium:CartPole-v1 --port 8000 &
    python examples/external_cartpole.py http://127.0.0.1:8000 --clients 8 --inference remote

Each client thread runs its own env and episodes until the server's learner is done (or
`--steps` steps in all), and the script prints the mean return of every 100 episodes.
"""

from __future__ import annotations

import argparse
import threading
import time

import gymnasium as gym
import numpy as np

from jaxrl_sys.client import PolicyClient


def play(address: str, inference: str, seed: int, returns: list, stop: threading.Event,
         token: str | None) -> None:
    """Episodes of one env until `stop` is set."""
    client = PolicyClient(address, inference=inference, token=token, update_interval=1.0)
    env = gym.make("CartPole-v1")
    episode_seed = seed
    while not stop.is_set():
        obs, _ = env.reset(seed=episode_seed)
        episode_seed += 1000
        episode = client.start_episode()
        while True:
            obs, reward, terminated, truncated, _ = env.step(client.get_action(episode, obs))
            client.log_returns(episode, reward)
            if terminated or truncated:
                break
        returns.append(client.end_episode(episode, obs, terminated=terminated)["return"])
    client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("address")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--inference", choices=("remote", "local"), default="remote")
    p.add_argument("--steps", type=int, default=None, help="stop after about this many steps")
    p.add_argument("--token", default=None)
    args = p.parse_args()
    returns: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=play, args=(args.address, args.inference, seed, returns,
                                                   stop, args.token), daemon=True)
               for seed in range(args.clients)]
    for thread in threads:
        thread.start()
    status = PolicyClient(args.address, token=args.token)
    started, reported = time.monotonic(), 0
    while True:
        time.sleep(1.0)
        learner = status.metrics().get("learner") or {}
        while len(returns) >= reported + 100:
            print(f"episodes {reported + 1}-{reported + 100}: mean return "
                  f"{np.mean(returns[reported:reported + 100]):.1f} "
                  f"({time.monotonic() - started:.0f} s, {learner.get('steps_learned', 0):,} "
                  "steps learned)", flush=True)
            reported += 100
        if learner.get("done") or learner.get("error") or (
                args.steps is not None and sum(returns) >= args.steps):
            break
    stop.set()
    for thread in threads:
        thread.join()
    print(f"learner: {learner}")


if __name__ == "__main__":
    main()
