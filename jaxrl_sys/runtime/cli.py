"""What the scripts' command lines share: a parser whose errors are one line, and the exit
codes (2: bad input, 1: a fault at run time, 130: interrupted). Imports no JAX, so a script
can import it before `waiting.catch_interrupts()` at no cost."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
from typing import Callable, NoReturn

from jaxrl_sys.runtime.waiting import catch_interrupts, was_interrupted


class UsageError(ValueError):
    """Bad input to a run (flags, spec fields, files): printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """argparse with bad flags raised as `UsageError` (one line, exit 2), never a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def guarded(body: Callable[[], int], user_errors: tuple[type[BaseException], ...],
            faults: tuple[type[BaseException], ...] = ()) -> int:
    """`body()`'s exit code; `user_errors` print one line and give 2, `faults` 1, Ctrl-C 130.

    A Ctrl-C inside an extension's own code can surface as that code's error instead of
    KeyboardInterrupt (tensorstore's import, under orbax, raises ImportError): any error
    after a recorded SIGINT is the interrupt.
    """
    try:
        return body()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if was_interrupted():
            print("interrupted", file=sys.stderr)
            return 130
        if isinstance(error, user_errors):
            print(f"error: {error}", file=sys.stderr)
            return 2
        if isinstance(error, faults):
            print(f"error: {error}", file=sys.stderr)
            return 1
        raise


def leave(code: int) -> NoReturn:
    """Exit the script with `code`.

    After an interrupt, work may still be in flight inside XLA, and Python's own exit would
    tear XLA down under it (the process aborts). So then the exit handlers run (among them
    multiprocessing's, which ends the worker processes) and the process leaves at once.
    """
    if code == 130:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def run_script(main: Callable[[], int]) -> NoReturn:
    """Run a script's `main()` and exit with its code (see `leave`). A Ctrl-C that comes
    before `main` has its `guarded` in place (while it imports) is exit code 130 as well."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    leave(code)


def console_entry(main: Callable[[], int]) -> NoReturn:
    """A console entry point's body: Ctrl-C is caught from the start (before the heavy imports
    in `main`, where Python could drop it), then `run_script(main)`."""
    catch_interrupts()
    run_script(main)
