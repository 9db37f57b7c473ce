"""The suite's per-test seconds, from a pytest JUnit report, as the order tests/conftest.py
starts the long tests in: `python benchmarks/suite_durations.py REPORT.xml [--out
tests/durations.json] [--min-seconds 5]`.

Make the report with `python -m pytest --junitxml REPORT.xml` (the whole suite, both workers).
The tests that run in a child process (`learning`, `user_codegen`) are started longest first,
so that neither xdist worker is left alone with a long one at the end of a pass; the file
holds every test of at least `--min-seconds` (test id -> seconds, rounded), and a test not in
it is taken as short. Stale figures cost only scheduling, never a result.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def node_id(classname: str, name: str) -> str:
    """pytest's node id of a JUnit test case ("tests.test_x" + "test_y[p]" ->
    "tests/test_x.py::test_y[p]"; a test class stays a `::` part)."""
    parts = classname.split(".")
    modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
    end = modules[0] + 1 if modules else len(parts)
    path = "/".join(parts[:end]) + ".py"
    return "::".join([path, *parts[end:], name])


def read_report(path: Path) -> dict[str, float]:
    """Test id -> seconds (setup, call and teardown) of every test case in a JUnit report."""
    seconds: dict[str, float] = {}
    for case in ET.parse(path).iter("testcase"):
        key = node_id(case.get("classname", ""), case.get("name", ""))
        seconds[key] = seconds.get(key, 0.0) + float(case.get("time", 0.0))
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Write the durations file from a report; one line and exit 2 for a missing or unreadable
    report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="pytest's --junitxml output")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--min-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    try:
        seconds = read_report(args.report)
    except (OSError, ET.ParseError) as error:
        print(f"error: cannot read the JUnit report {args.report}: {error}", file=sys.stderr)
        return 2
    kept = {k: round(v, 1) for k, v in sorted(seconds.items(), key=lambda kv: -kv[1])
            if v >= args.min_seconds}
    args.out.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    print(f"{len(kept)} of {len(seconds)} tests ({sum(kept.values()):.0f} of "
          f"{sum(seconds.values()):.0f} s) written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
