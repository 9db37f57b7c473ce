"""`jaxrl-serve` in a process of its own, for scripts and tests that drive a server from
outside: started on a free port, its address read from the first line it prints."""

from __future__ import annotations

import subprocess
import sys
from typing import Sequence


class ServerDidNotStart(RuntimeError):
    """The server process printed something other than its address first (its output is the
    message) and has been killed."""


def start_server_process(args: Sequence[str]) -> tuple[subprocess.Popen, str]:
    """`jaxrl-serve ARGS --port 0` in a new process, and its address ("http://HOST:PORT") once
    its first line says it serves. The process's output stays on its `stdout` pipe: read or
    drain it, or a long run blocks on a full pipe.

    Raises:
        ServerDidNotStart: the server printed an error first (its output is the message).
    """
    process = subprocess.Popen([sys.executable, "-m", "jaxrl_sys.commands.serve", *args,
                                "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    first = process.stdout.readline()
    if " at http://" not in first:
        process.kill()
        raise ServerDidNotStart((first + process.stdout.read()).strip())
    return process, first.rsplit(" at ", 1)[1].strip()
