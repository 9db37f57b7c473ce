"""An application outside the process: a Gymnasium env (CartPole-v1 unless `--env` names
another) stepped here, actions from a policy server through `PolicyClient` only.

    jaxrl-serve --learn --agent ppo --env gymnasium:CartPole-v1 --port 8000 &
    python examples/external_cartpole.py http://127.0.0.1:8000 --clients 8 --inference remote
    jaxrl-serve --learn --agent sac --env gymnasium:Pendulum-v1 --port 8001 &
    python examples/external_cartpole.py http://127.0.0.1:8001 --env Pendulum-v1 --until-return -200

Each client thread runs its own env and episodes until the mean return of the last 100
episodes reaches `--until-return` (exit code 0), or the server's learner is done or `--steps`
steps have been taken without it (exit code 1). It prints the mean return of every 100
episodes, and a last line of JSON: reached, episodes, steps, the last 100's mean, seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import gymnasium as gym
import numpy as np

from jaxrl_sys.client import PolicyClient


def play(address: str, env_id: str, inference: str, seed: int, returns: list, lengths: list,
         stop: threading.Event, token: str | None) -> None:
    """Episodes of one env until `stop` is set."""
    client = PolicyClient(address, inference=inference, token=token, update_interval=1.0)
    env = gym.make(env_id)
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
        ended = client.end_episode(episode, obs, terminated=terminated)
        lengths.append(ended["length"])
        returns.append(ended["return"])
    client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("address")
    p.add_argument("--env", default="CartPole-v1", help="the Gymnasium env id")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--inference", choices=("remote", "local"), default="remote")
    p.add_argument("--steps", type=int, default=None, help="give up after this many steps")
    p.add_argument("--until-return", type=float, default=475.0,
                   help="stop once the last 100 episodes' mean return reaches this")
    p.add_argument("--token", default=None)
    args = p.parse_args()
    returns: list = []
    lengths: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=play, args=(args.address, args.env, args.inference, seed,
                                                   returns, lengths, stop, args.token),
                                daemon=True)
               for seed in range(args.clients)]
    for thread in threads:
        thread.start()
    status = PolicyClient(args.address, token=args.token)
    started, reported, reached = time.monotonic(), 0, False
    while not reached:
        time.sleep(1.0)
        learner = status.metrics().get("learner") or {}
        while len(returns) >= reported + 100:
            print(f"episodes {reported + 1}-{reported + 100}: mean return "
                  f"{np.mean(returns[reported:reported + 100]):.1f} "
                  f"({time.monotonic() - started:.0f} s, {learner.get('steps_learned', 0):,} "
                  "steps learned)", flush=True)
            reported += 100
        recent = returns[-100:]
        reached = len(recent) == 100 and float(np.mean(recent)) >= args.until_return
        steps = sum(lengths)
        if learner.get("done") or learner.get("error") or (
                args.steps is not None and steps >= args.steps):
            break
    stop.set()
    for thread in threads:
        thread.join()
    print(json.dumps({"reached": reached, "episodes": len(returns), "steps": int(sum(lengths)),
                      "mean_last_100": float(np.mean(returns[-100:])) if returns else None,
                      "seconds": round(time.monotonic() - started, 1), "learner": learner}))
    sys.exit(0 if reached else 1)


if __name__ == "__main__":
    main()
