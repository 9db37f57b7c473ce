"""RLlib's policy server under bench_serve.py's load, for the side by side of issue 54:
`RLLIB_PYTHON benchmarks/bench_rllib_serve.py --clients 64`.

RLlib's `PolicyServerInput` and `PolicyClient` left Ray after 2.9 (the `tune` extra installs a
newer Ray), so this script runs under a Python of its own with Ray 2.9 and torch; it imports
nothing of this project. One way to get one:

    python -m venv rllib-env
    rllib-env/bin/pip install "ray[rllib]==2.9.3" torch "numpy<2" "pyarrow<15" \
        "setuptools<70" "gymnasium==0.28.1"
    rllib-env/bin/python benchmarks/bench_rllib_serve.py --json rllib.json

It starts a PPO policy server in a process of its own (CartPole-v1's spaces, the same two
layers of 64 tanh units as this project's PPO, torch, no rollout workers), whose loop only
samples: actions are served and nothing is trained, as `jaxrl-serve RUN_DIR` without
`--learn`. Then, against 127.0.0.1:

- remote inference: `--clients` threads, each a `PolicyClient(inference_mode="remote")` with
  a `requests.Session` of its own, acting back to back in one episode for `--seconds` (act
  requests only, as bench_serve.py's); the act latency seen by the clients (p50, p99, with
  the retries of connections the server reset) and actions per second over all of them;
- local inference: one `PolicyClient(inference_mode="local")` acting for `--seconds`.

The observations are CartPole-like random vectors, as in bench_serve.py. Prints a markdown
table and writes `--json`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

import numpy as np

OBS_SHAPE = (4,)


def serve(port: int) -> None:
    """The server process: PPO with a `PolicyServerInput`, sampling forever."""
    import gymnasium as gym
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.policy_server_input import PolicyServerInput

    config = (
        PPOConfig()
        .environment(env=None,
                     observation_space=gym.spaces.Box(-np.inf, np.inf, OBS_SHAPE, np.float32),
                     action_space=gym.spaces.Discrete(2))
        .framework("torch")
        .rollouts(num_rollout_workers=0, enable_connectors=False)
        .offline_data(input_=lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", port))
        .training(model={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"})
        .reporting(min_sample_timesteps_per_iteration=0)
        .debugging(log_level="ERROR")
    )
    worker = config.build().workers.local_worker()
    print(f"serving at http://127.0.0.1:{port}", flush=True)
    while True:
        worker.sample()


def start_server(port: int) -> subprocess.Popen:
    """The server process, once it serves; a thread drains its output from then on (Ray logs
    much, and a full pipe would stop the server)."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while True:
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"the RLlib server did not start (exit {process.wait()})")
        if line.startswith("serving at "):
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process


MAX_RETRIES = 500  # resets in a row (5 s of retrying) before the server counts as gone


def with_retries(call, resets: list[int], i: int):
    """`call()`, sent again after each connection the server reset. RLlib's server is Python's
    `http.server` with its listen backlog of 5 and a connection per request (HTTP/1.0), and
    with many clients at once some connections are refused: an application must retry. A
    server that has died ends the run instead of leaving its clients retrying forever."""
    import requests

    for _ in range(MAX_RETRIES):
        try:
            return call()
        except requests.exceptions.ConnectionError:
            resets[i] += 1
            time.sleep(0.01)
    raise SystemExit(f"the RLlib server reset {MAX_RETRIES} connections in a row: is it gone?")


def remote_load(address: str, clients: int, seconds: float) -> dict:
    """`clients` threads acting back to back for `seconds`, one session each; the latency of
    an action includes the retries of reset connections, which are counted."""
    import requests
    from ray.rllib.env.policy_client import PolicyClient

    latencies: list[list[float]] = [[] for _ in range(clients)]
    counts, resets = [0] * clients, [0] * clients
    start = threading.Barrier(clients + 1)

    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            act(i)
        except BaseException as failure:  # SystemExit too: a thread's own ends only itself
            failures.append(failure)
            start.abort()  # the others and the main thread stop waiting at the start

    def act(i: int) -> None:
        client = PolicyClient(address, inference_mode="remote", session=requests.Session())
        rng = np.random.default_rng(i)
        obs = rng.normal(0, 0.1, OBS_SHAPE).astype(np.float32)
        episode = with_retries(lambda: client.start_episode(training_enabled=False), resets, i)
        with_retries(lambda: client.get_action(episode, obs), resets, i)
        resets[i] = 0
        start.wait()
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            obs = rng.normal(0, 0.1, OBS_SHAPE).astype(np.float32)
            sent = time.perf_counter()
            with_retries(lambda: client.get_action(episode, obs), resets, i)
            latencies[i].append(time.perf_counter() - sent)
            counts[i] += 1
        with_retries(lambda: client.end_episode(episode, obs), resets, i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"a client failed: {failures[0]}")
    ms = np.concatenate([np.asarray(x) for x in latencies]) * 1e3
    return {"actions_per_s": sum(counts) / elapsed, "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "actions": int(sum(counts)),
            "reset_connections": int(sum(resets))}


def local_load(address: str, seconds: float) -> dict:
    """One local-inference client acting for `seconds`: actions/s."""
    from ray.rllib.env.policy_client import PolicyClient

    client = PolicyClient(address, inference_mode="local", update_interval=10.0)
    rng = np.random.default_rng(0)
    episode, actions = client.start_episode(training_enabled=False), 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        obs = rng.normal(0, 0.1, OBS_SHAPE).astype(np.float32)
        client.get_action(episode, obs)
        client.log_returns(episode, 1.0)
        actions += 1
    elapsed = time.perf_counter() - started
    client.end_episode(episode, obs)
    return {"actions_per_s": actions / elapsed, "actions": actions}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=9911)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--repeats", type=int, default=3,
                   help="remote rounds; the table shows each figure's median over them")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    try:
        import ray
        for module in ("torch", "ray.rllib.env.policy_server_input"):  # the server's needs
            importlib.import_module(module)
    except ImportError as error:
        print(f"error: this script needs Ray 2.9 with RLlib and torch ({error}); its docstring "
              "says how to make such a Python", file=sys.stderr)
        sys.exit(2)
    server = start_server(args.port)
    address = f"http://127.0.0.1:{args.port}"
    try:
        rounds = [remote_load(address, args.clients, args.seconds) for _ in range(args.repeats)]
        remote = {key: float(np.median([r[key] for r in rounds]))
                  for key in ("actions_per_s", "p50_ms", "p99_ms", "reset_connections")}
        remote["rounds"] = rounds
        local = local_load(address, args.seconds)
    finally:
        server.terminate()
        server.wait(timeout=60)
    figures = {"date": date.today().isoformat(),
               "machine": platform.processor() or platform.machine(),
               "ray": ray.__version__, "clients": args.clients, "seconds": args.seconds,
               "remote": remote, "local": local}
    print("| inference | clients | actions/s | p50 ms | p99 ms | reset connections |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| remote | {args.clients} | {remote['actions_per_s']:,.0f} | {remote['p50_ms']:.1f} | "
          f"{remote['p99_ms']:.1f} | {remote['reset_connections']:.0f} |")
    print(f"| local | 1 | {local['actions_per_s']:,.0f} | - | - | - |")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
