"""Ops per loop body of a compiled program: what one rollout step or one update step runs.

On an accelerator a loop body's cost is mostly its kernel launches, so the number of ops XLA
keeps in each `while` body after optimisation (a fusion counts as one) is the figure to cut.
This module reads the optimised HLO text of a compiled JAX program (`compiled.as_text()`, on
any backend) and reports every loop: where its `lax.scan`/`while_loop` was written, its trip
count, its ops, and how many of them are fusions, collectives and library calls. Ops of
called computations (`call`) count in the loop that calls them, the costlier branch of a
`conditional` counts, and a nested loop counts as one op of its parent and gets its own row.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Optional

# ops that move no data at run time (tuple plumbing, constants, layout-free reshapes)
FREE_OPS = frozenset({"parameter", "get-tuple-element", "tuple", "constant", "bitcast",
                      "after-all", "opt-barrier", "partition-id", "replica-id"})
COLLECTIVE_OPS = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                            "reduce-scatter", "all-to-all", "collective-permute",
                            "collective-permute-start"})
# the second half of an asynchronous pair, counted with its start
DONE_OPS = frozenset({"all-reduce-done", "all-gather-done", "collective-permute-done",
                      "async-done", "copy-done", "send-done", "recv-done"})

_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = (.*)$")
_OPCODE = re.compile(r"(?:^|[\s}\]])([a-z][a-z0-9\-]*)\(")
_ATTRIBUTE = re.compile(r"\b(calls|to_apply|body|condition|true_computation|"
                        r"false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_FRAME = re.compile(r"stack_frame_id=(\d+)")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One HLO instruction: its opcode, the computations it names, its trip count (loops)
    and its stack frame id (where JAX traced it), when the text gives them."""

    opcode: str
    called: dict[str, tuple[str, ...]]
    trip_count: Optional[int]
    frame: Optional[int]


@dataclasses.dataclass(frozen=True)
class LoopBody:
    """One `while` loop of a program: `source` where it was written (file:line function),
    `depth` 0 for a loop in no other loop, `trip_count` when XLA knows it; `ops` run per
    iteration (fusions counted once, nested loops once, free ops not at all), of which
    `fusions`, `collectives` and `custom_calls`."""

    source: str
    depth: int
    trip_count: Optional[int]
    ops: int
    fusions: int
    collectives: int
    custom_calls: int


def _parse_instruction(text: str) -> Optional[Instruction]:
    match = _INSTRUCTION.match(text)
    if not match:
        return None
    rest = match.group(1)
    opcode = _OPCODE.search(rest)
    if not opcode:
        return None
    called: dict[str, tuple[str, ...]] = {}
    for key, name in _ATTRIBUTE.findall(rest):
        called[key] = (name,)
    branches = _BRANCHES.search(rest)
    if branches:
        called["branches"] = tuple(b.strip().lstrip("%") for b in branches.group(1).split(","))
    trip = _TRIP_COUNT.search(rest)
    frame = _FRAME.search(rest)
    return Instruction(opcode.group(1), called, int(trip.group(1)) if trip else None,
                       int(frame.group(1)) if frame else None)


def parse_computations(hlo_text: str) -> tuple[dict[str, list[Instruction]], str]:
    """The computations of an HLO module's text, name -> instructions, and the entry's name."""
    computations: dict[str, list[Instruction]] = {}
    entry, current = "", None
    for line in hlo_text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = header.group(1)
            computations[current] = []
            if line.startswith("ENTRY"):
                entry = current
        elif line.startswith("}"):
            current = None
        elif current is not None:
            instruction = _parse_instruction(line)
            if instruction is not None:
                computations[current].append(instruction)
    return computations, entry


def _source_names(hlo_text: str) -> dict[int, str]:
    """Stack frame id -> 'file:line function' of its innermost location (the text's
    FileNames / FunctionNames / FileLocations / StackFrames tables)."""
    tables: dict[str, dict[int, str]] = {}
    section = None
    for line in hlo_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            tables[section] = {}
        elif not line.strip() or line.startswith(("%", "HloModule", "ENTRY")):
            section = None
        elif section is not None:
            key, _, value = line.partition(" ")
            if key.isdigit():
                tables[section][int(key)] = value
    files = {k: json.loads(v) for k, v in tables.get("FileNames", {}).items()}
    functions = {k: json.loads(v) for k, v in tables.get("FunctionNames", {}).items()}
    locations = {}
    for k, v in tables.get("FileLocations", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        path = files.get(int(fields.get("file_name_id", 0)), "?")
        short = path.split("jaxrl_sys/", 1)[-1] if "jaxrl_sys/" in path else path
        locations[k] = (f"{short}:{fields.get('line', '?')} "
                        f"{functions.get(int(fields.get('function_name_id', 0)), '?')}")
    frames = {}
    for k, v in tables.get("StackFrames", {}).items():
        fields = dict(re.findall(r"(\w+)=(\d+)", v))
        frames[k] = locations.get(int(fields.get("file_location_id", 0)), "?")
    return frames


def loop_bodies(hlo_text: str) -> list[LoopBody]:
    """Every `while` loop of the optimised HLO `hlo_text`, outermost first (depth-first in
    program order), with its per-iteration counts (see `LoopBody`)."""
    computations, entry = parse_computations(hlo_text)
    sources = _source_names(hlo_text)
    loops: list[LoopBody] = []

    def count(name: str, depth: int, record: bool) -> list[int]:
        """[ops, fusions, collectives, custom calls] of computation `name`; nested loops
        are appended to `loops` when `record` (off while the branches of a conditional are
        compared, so the costlier one's loops are listed once)."""
        totals = [0, 0, 0, 0]
        for instruction in computations.get(name, ()):
            op = instruction.opcode
            if op in FREE_OPS or op in DONE_OPS:
                continue
            if op == "call":
                sub = count(instruction.called["to_apply"][0], depth, record)
                totals = [a + b for a, b in zip(totals, sub)]
                continue
            own = [1, op == "fusion", op in COLLECTIVE_OPS, op == "custom-call"]
            totals = [a + b for a, b in zip(totals, own)]
            if op == "conditional":
                branches = (instruction.called.get("branches")
                            or instruction.called.get("true_computation", ())
                            + instruction.called.get("false_computation", ()))
                costliest = max(branches, key=lambda b: count(b, depth, False)[0])
                sub = count(costliest, depth, record)
                totals = [a + b for a, b in zip(totals, sub)]
            elif op == "while" and record:
                at = len(loops)
                loops.append(None)  # keeps outer loops before the loops they contain
                body_counts = count(instruction.called["body"][0], depth + 1, True)
                source = sources.get(instruction.frame, "?") if instruction.frame else "?"
                loops[at] = LoopBody(source, depth, instruction.trip_count, *body_counts)
        return totals

    count(entry, 0, True)
    return loops


def program_ops(hlo_text: str) -> int:
    """Ops of the entry computation itself (loops counted once each, see `loop_bodies`)."""
    computations, entry = parse_computations(hlo_text)
    return sum(1 for i in computations.get(entry, ())
               if i.opcode not in FREE_OPS and i.opcode not in DONE_OPS)


def markdown_table(rows: list[tuple[str, LoopBody]]) -> list[str]:
    """Markdown lines of (program name, loop) rows."""
    lines = ["| program | loop (where it was written) | depth | trips | ops | fusions | "
             "collectives | library calls |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for program, loop in rows:
        trips = "?" if loop.trip_count is None else str(loop.trip_count)
        lines.append(f"| {program} | `{loop.source}` | {loop.depth} | {trips} | {loop.ops} | "
                     f"{loop.fusions} | {loop.collectives} | {loop.custom_calls} |")
    return lines
