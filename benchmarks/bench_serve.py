"""The policy server under load: `python benchmarks/bench_serve.py [RUN_DIR] --clients 64`.

Starts `jaxrl-serve RUN_DIR --port 0` in a process of its own (a short PPO CartPole-v1 run is
trained first when no run is given), then, against 127.0.0.1 on the same machine:

- remote inference: `--clients` episodes acting at once from one asyncio process (one
  keep-alive HTTP/1.1 connection each over asyncio streams, msgpack bodies), each sending its
  next observation as soon as its last action came back, for `--seconds`; the act latency
  (p50, p99, from the client's side) and actions per second over all clients;
- local inference: one `PolicyClient(inference="local")` acting for `--seconds` on the copy of
  the parameters it fetched, sending its steps to the server in batches; actions per second.

The observations are CartPole-like random vectors: the server's cost does not depend on them.
The machine is noisy: remote load runs `--repeats` rounds and the table gives each figure's
median. Prints a markdown table and writes `--json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np


def train_short_run(root: Path) -> Path:
    """A 20k-step PPO CartPole-v1 run to serve."""
    from jaxrl_sys import RunSpec, agents, envs, run

    spec = RunSpec(agent="ppo", env="CartPole-v1", total_steps=20_480, chunks=1,
                   run_root=str(root), progress=False, eval_episodes=0)
    return run(spec, agents.load, envs).run_dir


def start_server(run_dir: Path, max_batch: int, window_ms: float) -> tuple[subprocess.Popen, str]:
    """The server process and its address, once it serves."""
    process = subprocess.Popen(
        [sys.executable, "-m", "jaxrl_sys.commands.serve", str(run_dir), "--port", "0",
         "--max-batch", str(max_batch), "--batch-window-ms", str(window_ms)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = process.stdout.readline()
    if " at http://" not in line:
        raise SystemExit(f"the server did not start: {line}{process.stdout.read()}")
    return process, line.rsplit(" at ", 1)[1].strip()


class RawConnection:
    """One keep-alive HTTP/1.1 connection over asyncio streams: the load generator's client,
    cheaper per request than httpx, so that on a shared machine the server, not the load
    generator, is what is measured."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    async def open(self) -> "RawConnection":
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def post(self, path: str, body: bytes, kind: str) -> tuple[int, bytes]:
        """(status, body) of one POST."""
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: {kind}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return int(status_line.split()[1]), await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def remote_load(address: str, clients: int, seconds: float, obs_shape) -> dict:
    """`clients` episodes acting back to back for `seconds`, one connection each: the act
    latency seen by the clients, and actions/s."""
    from urllib.parse import urlsplit

    from jaxrl_sys.serve import codec

    kind = codec.MSGPACK
    url = urlsplit(address)
    latencies: list[float] = []
    connections = [await RawConnection(url.hostname, url.port).open() for _ in range(clients)]

    async def one(i: int, stop: float) -> int:
        http = connections[i]
        _, answer = await http.post("/v1/episodes", codec.encode({}, kind), kind)
        episode = codec.decode(answer, kind)["episode_id"]
        rng, actions = np.random.default_rng(i), 0
        while time.perf_counter() < stop:
            obs = rng.normal(0, 0.1, obs_shape).astype(np.float32)
            body = codec.encode({"obs": codec.pack_array(obs, kind)}, kind)
            sent = time.perf_counter()
            status, answer = await http.post(f"/v1/episodes/{episode}/act", body, kind)
            latencies.append(time.perf_counter() - sent)
            if status != 200:
                raise SystemExit(f"act answered {status}: {answer!r}")
            actions += 1
        await http.post(f"/v1/episodes/{episode}/end", codec.encode({}, kind), kind)
        return actions

    try:
        await asyncio.gather(*(one(i, time.perf_counter() + 1.0) for i in range(clients)))
        latencies.clear()  # one second of warm-up: connections open, programs run once
        started = time.perf_counter()
        counts = await asyncio.gather(*(one(i, started + seconds) for i in range(clients)))
        elapsed = time.perf_counter() - started
    finally:
        for connection in connections:
            connection.close()
    ms = np.asarray(latencies) * 1e3
    return {"actions_per_s": sum(counts) / elapsed, "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "actions": int(sum(counts))}


def local_load(address: str, seconds: float, obs_shape) -> dict:
    """One local-inference client acting for `seconds`: actions/s."""
    from jaxrl_sys.client import PolicyClient

    rng = np.random.default_rng(0)
    with PolicyClient(address, inference="local") as client:
        episode, actions = client.start_episode(), 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            client.get_action(episode, rng.normal(0, 0.1, obs_shape).astype(np.float32))
            client.log_returns(episode, 1.0)
            actions += 1
        client.end_episode(episode)
        elapsed = time.perf_counter() - started
    return {"actions_per_s": actions / elapsed, "actions": actions}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", default=None)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--repeats", type=int, default=3,
                   help="remote rounds; the table shows each figure's median over them")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--batch-window-ms", type=float, default=2.0)
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(args.run_dir) if args.run_dir else train_short_run(Path(scratch))
        server, address = start_server(run_dir, args.max_batch, args.batch_window_ms)
        try:
            import httpx

            obs_shape = tuple(httpx.get(f"{address}/v1/policy").json()["obs_shape"])
            rounds = [asyncio.run(remote_load(address, args.clients, args.seconds, obs_shape))
                      for _ in range(args.repeats)]
            remote = {key: float(np.median([r[key] for r in rounds]))
                      for key in ("actions_per_s", "p50_ms", "p99_ms")}
            remote["rounds"] = rounds
            local = local_load(address, args.seconds, obs_shape)
            metrics = httpx.get(f"{address}/metrics").json()
        finally:
            server.terminate()
            server.wait(timeout=30)
    figures = {"date": date.today().isoformat(), "machine": platform.processor() or platform.machine(),
               "clients": args.clients, "seconds": args.seconds, "max_batch": args.max_batch,
               "batch_window_ms": args.batch_window_ms, "remote": remote, "local": local,
               "server_mean_batch": metrics["mean_batch"]}
    print("| inference | clients | actions/s | p50 ms | p99 ms | mean batch |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| remote | {args.clients} | {remote['actions_per_s']:,.0f} | {remote['p50_ms']:.1f} | "
          f"{remote['p99_ms']:.1f} | {metrics['mean_batch']:.1f} |")
    print(f"| local | 1 | {local['actions_per_s']:,.0f} | - | - | - |")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
