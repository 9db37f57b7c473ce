"""Serve a run's policy over HTTP: `jaxrl-serve RUN_DIR --port 8000`.

Loads the run's latest checkpoint (or `--chunk N`) and answers `act` requests of applications
that step their own envs (`jaxrl_sys.client.PolicyClient`), gathering concurrent requests into
one device call. `--learn --agent A --env gymnasium:<id>` starts a new run that learns from
the episodes clients report (`jaxrl-serve RUN_DIR --learn` continues one). Binds 127.0.0.1
unless `--host` says otherwise; any other address needs a token (`--token` or
JAXRL_SERVE_TOKEN), checked on every request. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded

TOKEN_VARIABLE = "JAXRL_SERVE_TOKEN"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", nargs="?", default=None,
                   help="a run directory written by jaxrl-train (or by jaxrl-serve --learn)")
    p.add_argument("--learn", action="store_true",
                   help="learn from the episodes clients report (a new run with --agent and "
                        "--env, or continue RUN_DIR)")
    p.add_argument("--agent", default=None, help="--learn: the agent (dqn, ppo, sac, ...)")
    p.add_argument("--env", default=None,
                   help="--learn: the application's env as a host env name, for its spaces "
                        "and the agent's defaults (e.g. gymnasium:CartPole-v1)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="--learn: a config field (repeatable)")
    p.add_argument("--total-steps", type=int, default=None,
                   help="--learn: steps to learn from (default: the agent's)")
    p.add_argument("--seed", type=int, default=0, help="--learn: the learner's seed")
    p.add_argument("--run-root", default="runs", help="--learn: where the new run goes")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="--learn: checkpoint every N updates (and the last)")
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
    """A listening socket on `host:port` (connections wait in its backlog until the server
    takes them), or UsageError naming why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise UsageError(f"cannot bind {host}:{port}: {error.strerror}") from None
    sock.listen(2048)
    return sock


def serve(args: argparse.Namespace) -> int:
    settings = checked_settings(args)
    if args.learn:
        return serve_learning(args, settings)
    if args.run_dir is None:
        raise UsageError("give a RUN_DIR to serve, or --learn --agent A --env gymnasium:<id>")
    if args.agent or args.env or args.set or args.total_steps is not None:
        raise UsageError("--agent, --env, --set and --total-steps are for --learn")
    from jaxrl_sys import agents, envs
    from jaxrl_sys.serve.loading import served_run
    from jaxrl_sys.serve.service import PolicyService

    served = served_run(args.run_dir, agents.load, envs, chunk=args.chunk,
                        seed_index=args.seed_index, max_batch=settings.max_batch)
    sock = bound_socket(args.host, args.port)
    service = PolicyService(served, settings)
    served.program.warm_up(served.leaves)
    record = served.record
    return run_server(service, sock, f"serving {record.get('agent')} on {record.get('env')} "
                                     f"(checkpoint after chunk {record['chunk']}, seed index "
                                     f"{args.seed_index})")


def run_server(service, sock: socket.socket, what: str) -> int:
    """Serve `service` on `sock` after printing `what` and the address, until SIGINT (exit
    code 130) or SIGTERM (0), each a graceful shutdown, or a learning server's learner fails
    (the caller raises its error)."""
    import uvicorn

    from jaxrl_sys.serve.app import build_app

    class Server(uvicorn.Server):
        """uvicorn's server, whose signals end the serving and nothing else (uvicorn raises
        a caught signal again once it has stopped, which would print a traceback here)."""

        stopped_by: Optional[int] = None

        @contextlib.contextmanager
        def capture_signals(self):
            def stop(signum, frame):
                self.stopped_by = signum
                self.handle_exit(signum, frame)

            previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    host, port = sock.getsockname()[:2]
    print(f"{what} at http://{host}:{port}", flush=True)
    server = Server(uvicorn.Config(build_app(service), log_level="warning", access_log=False,
                                   timeout_graceful_shutdown=5))
    if service.learner is not None:
        def watch() -> None:
            while not server.should_exit:
                if service.learner.error is not None:
                    server.should_exit = True
                time.sleep(0.2)

        threading.Thread(target=watch, name="jaxrl-serve-watch", daemon=True).start()
    server.run(sockets=[sock])
    return 130 if server.stopped_by == signal.SIGINT else 0


def serve_learning(args: argparse.Namespace, settings) -> int:
    """`--learn`: a new run from --agent and --env, or RUN_DIR continued."""
    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.checkpoint import Checkpointer
    from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices
    from jaxrl_sys.runtime.driver import NonFiniteError
    from jaxrl_sys.runtime.session import TrainingStopped
    from jaxrl_sys.runtime.metrics import make_run_dir
    from jaxrl_sys.runtime.run_spec import RunSpec, resolve, save_run_file
    from jaxrl_sys.runtime.session import open_run
    from jaxrl_sys.serve.learner import LearnerStatus
    from jaxrl_sys.serve.learning import learning_program, learning_run
    from jaxrl_sys.serve.service import PolicyService

    if args.checkpoint_every < 1:
        raise UsageError(f"--checkpoint-every must be >= 1, got {args.checkpoint_every}")
    carry = status = None
    if args.run_dir is not None:
        if args.agent or args.env or args.set or args.total_steps is not None:
            raise UsageError("a continued run keeps its agent, env and config: drop --agent, "
                             "--env, --set and --total-steps")
        saved = open_run(args.run_dir, agents.load, envs)
        resolved, agent, run_dir = saved.resolved, saved.agent, Path(args.run_dir)
        program = learning_program(resolved, agent, settings.max_batch)
        checkpointer = Checkpointer(run_dir, create=False) if (run_dir / "checkpoints").is_dir() \
            else None
        saved_at = checkpointer.latest_chunk() if checkpointer is not None else None
        if checkpointer is not None:
            checkpointer.close()
        if saved_at is not None:  # else: killed before its first checkpoint, the log replays
            carry, record = saved.restore()
            if "next_episode" not in record:
                raise UsageError(f"{run_dir} was not trained by jaxrl-serve --learn (its "
                                 "checkpoints do not say what clients' episodes they learned)")
            status = LearnerStatus.from_record(record)
    else:
        if args.agent is None or args.env is None:
            raise UsageError("--learn starts a run from --agent and --env (or continues RUN_DIR)")
        spec = RunSpec(agent=args.agent, env=args.env, overrides=tuple(args.set),
                       total_steps=args.total_steps, seed=args.seed, run_root=args.run_root,
                       progress=False)
        resolved = resolve(spec, agents.load, envs)
        request_devices(spec.devices)
        enable_compile_cache()
        _, agent = resolved.build(envs)
        program = learning_program(resolved, agent, settings.max_batch)
        run_dir = make_run_dir(spec.run_root, spec.agent, resolved.env_name)
        save_run_file(run_dir, resolved)
    sock = bound_socket(args.host, args.port)
    learning = learning_run(resolved, agent, program, run_dir, args.checkpoint_every, carry,
                            status)
    service = PolicyService(learning.served, settings, sink=learning.add,
                            lanes=learning.learner.fns.num_envs)
    learning.attach(service)
    service.env_steps = learning.log.steps()  # the exploration schedule goes on where it was
    program.warm_up(learning.served.leaves)
    learning.learner.start()
    try:
        code = run_server(service, sock, f"learning {resolved.spec.agent} on "
                                         f"{resolved.env_name} from clients, run dir {run_dir},")
    finally:
        learning.close()
    error = learning.learner.error
    if isinstance(error, NonFiniteError):
        raise TrainingStopped(f"{error}; the last good checkpoint is kept: continue with "
                              f"jaxrl-serve {run_dir} --learn") from None
    if error is not None:
        raise error
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    from jaxrl_sys import agents, envs
    from jaxrl_sys.runtime.session import USER_ERRORS
    from jaxrl_sys.serve.loading import ServeError

    from jaxrl_sys.runtime.session import TrainingStopped

    return guarded(lambda: serve(build_parser().parse_args(argv)),
                   USER_ERRORS + agents.USER_ERRORS + envs.USER_ERRORS + (ServeError,),
                   faults=(TrainingStopped,))


def entry() -> None:
    """The `jaxrl-serve` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
