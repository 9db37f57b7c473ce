"""What the scripts' command lines share: a parser whose errors are one line, and the exit
codes (2: bad input, 1: a fault at run time, 130: interrupted)."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from jaxrl_sys.run_spec import UsageError


class Parser(argparse.ArgumentParser):
    """argparse with bad flags raised as `UsageError` (one line, exit 2), never a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def guarded(body: Callable[[], int], user_errors: tuple[type[BaseException], ...],
            faults: tuple[type[BaseException], ...] = ()) -> int:
    """`body()`'s exit code; `user_errors` print one line and give 2, `faults` 1, Ctrl-C 130."""
    try:
        return body()
    except user_errors as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except faults as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
