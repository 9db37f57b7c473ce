"""Serve a run's policy over HTTP: `jaxrl-serve RUN_DIR --port 8000`.

Loads the run's latest checkpoint (or `--chunk N`) and answers `act` requests of applications
that step their own envs (`jaxrl_sys.client.PolicyClient`), gathering concurrent requests into
one device call. Binds 127.0.0.1 unless `--host` says otherwise; any other address needs a
token (`--token` or JAXRL_SERVE_TOKEN), checked on every request. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded

TOKEN_VARIABLE = "JAXRL_SERVE_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory written by jaxrl-train")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (0: any free one, printed)")
    p.add_argument("--token", default=None,
                   help=f"the token every request must carry (default: ${TOKEN_VARIABLE}); "
                        "required on any address but the loopback")
    p.add_argument("--chunk", type=int, default=None, help="checkpoint to load (default: latest)")
    p.add_argument("--seed-index", type=int, default=0, help="which of the run's seeds to serve")
    p.add_argument("--max-batch", type=int, default=64, help="most requests per device call")
    p.add_argument("--batch-window-ms", type=float, default=2.0,
                   help="how long the first request of a batch waits for others")
    p.add_argument("--episode-timeout", type=float, default=60.0,
                   help="seconds after which an episode not heard from is dropped")
    p.add_argument("--max-episodes", type=int, default=10_000, help="most episodes open at once")
    p.add_argument("--max-body", type=int, default=1 << 20, help="largest request body, bytes")
    return p


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_settings(args: argparse.Namespace):
    """The server's settings from the flags, every one checked before anything loads."""
    from jaxrl_sys.serve.service import ServeSettings

    token = args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE) or None
    if not is_loopback(args.host) and token is None:
        raise UsageError(f"--host {args.host} is reachable from other machines: give a token "
                         f"(--token or ${TOKEN_VARIABLE})")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    settings = ServeSettings(args.max_batch, args.batch_window_ms, args.episode_timeout,
                             args.max_episodes, args.max_body, token)
    problem = settings.problem()
    if problem:
        raise UsageError(problem)
    return settings


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`, or UsageError naming why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise UsageError(f"cannot bind {host}:{port}: {error.strerror}") from None
    return sock


def serve(args: argparse.Namespace) -> int:
    settings = checked_settings(args)
    import uvicorn

    from jaxrl_sys import agents, envs
    from jaxrl_sys.serve.app import build_app
    from jaxrl_sys.serve.loading import served_run
    from jaxrl_sys.serve.service import PolicyService

    served = served_run(args.run_dir, agents.load, envs, chunk=args.chunk,
                        seed_index=args.seed_index, max_batch=settings.max_batch)
    sock = bound_socket(args.host, args.port)
    service = PolicyService(served, settings)
    served.program.warm_up(served.leaves)
    record = served.record
    host, port = sock.getsockname()[:2]
    print(f"serving {record.get('agent')} on {record.get('env')} (checkpoint after chunk "
          f"{record['chunk']}, seed index {args.seed_index}) at http://{host}:{port}", flush=True)
    config = uvicorn.Config(build_app(service), log_level="warning", access_log=False,
                            timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.session import USER_ERRORS
    from jaxrl_sys.serve.loading import ServeError

    return guarded(lambda: serve(build_parser().parse_args(argv)),
                   USER_ERRORS + agents.USER_ERRORS + envs.USER_ERRORS + (ServeError,))


def entry() -> None:
    """The `jaxrl-serve` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
