"""Check that every promised (agent, env) pair learns on many seeds under every CPU code path.

    python scripts/check_learning.py                        # all cases, 16 seeds, all settings
    python scripts/check_learning.py --cases ppo:CartPole-v1 --settings native,SSE4_2 --jobs 2
    python scripts/check_learning.py --load a.json b.json   # print tables of saved results

Each setting (`native`, or `--xla_cpu_max_isa=AVX2|AVX|SSE4_2`, whichever this CPU allows)
runs in its own process, because XLA reads the flag when JAX starts. Prints, per case, every
seed's final (greedy) return under every setting, the fraction of seeds that reached the
threshold, collapses and the worst seed; exit code 1 if a case misses the rule (15 of 16 seeds
reach the threshold, none that did ends more than 5% below it), 2 for bad input.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from jaxrl_sys.tools import learning_check as lc
from jaxrl_sys.runtime.cli import Parser, guarded
from jaxrl_sys.runtime.cli import UsageError
from jaxrl_sys.runtime.execution import PlacementError


def all_cases() -> tuple[lc.LearningCase, ...]:
    """Every registered agent's promised cases."""
    from jaxrl_sys import agents

    return lc.cases(agents.promises())


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="all",
                   help=f"comma-separated cases or 'all' ({', '.join(c.name for c in all_cases())})")
    p.add_argument("--seeds", type=int, default=16, help="seeds 0..N-1 per case")
    p.add_argument("--settings", default="all",
                   help="comma-separated code-generation settings (native, AVX512, AVX2, AVX, "
                        "SSE4_2) or 'all' that this CPU allows; 'gpu' runs on the GPU")
    p.add_argument("--devices", type=int, default=1,
                   help="devices each run is data-parallel over (virtual CPU devices without "
                        "an accelerator), as train.py --devices")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (one per setting and case) at the same time")
    p.add_argument("--json", dest="json_out", default=None, help="write all results here")
    p.add_argument("--markdown", default=None, help="write the tables here")
    p.add_argument("--workdir", default=None,
                   help="directory for each setting's results as they come (default: a temp dir)")
    p.add_argument("--load", nargs="+", default=None, metavar="JSON",
                   help="print the tables of saved results instead of training")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    return p


def parse_cases(text: str) -> list[lc.LearningCase]:
    known = all_cases()
    if text == "all":
        return list(known)
    try:
        return [lc.find_case(name.strip(), known) for name in text.split(",") if name.strip()]
    except ValueError as error:
        raise UsageError(str(error)) from None


def parse_settings(text: str) -> list[str]:
    allowed, note = lc.available_settings()
    if text == "all":
        print(f"settings: {', '.join(allowed)} ({note})", file=sys.stderr)
        return allowed
    settings = [s.strip() for s in text.split(",") if s.strip()]
    for s in settings:
        if s == "gpu":
            continue
        if s not in lc.ISA_SETTINGS:
            raise UsageError(f"unknown setting {s!r}; known: {', '.join(lc.ISA_SETTINGS)}, gpu")
        if s not in allowed and s != "native":
            raise UsageError(f"setting {s} is not available here ({note}); "
                             f"available: {', '.join(allowed)}")
    return settings


def worker_environment(setting: str) -> dict[str, str]:
    """The environment of a worker process: the ISA flag, CPU or GPU, train.py's CPU flags."""
    from jaxrl_sys.runtime.devices import SAFE_CPU_FLAGS

    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if not f.startswith("--xla_cpu_max_isa"))
    if setting == "gpu":
        env.pop("JAX_PLATFORMS", None)
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # workers may share the GPU
    else:
        env["JAX_PLATFORMS"] = "cpu"
        flags = f"{flags} {lc.ISA_SETTINGS[setting]} {SAFE_CPU_FLAGS}"
    env["XLA_FLAGS"] = flags.strip()
    return env


def run_worker(setting: str, cases: list[lc.LearningCase], seeds: int, out: str,
               devices: int = 1) -> int:
    """Inside one setting's process: train every case and write the results as JSON."""
    from jaxrl_sys.runtime.devices import (
        enable_compile_cache, request_devices, set_safe_cpu_flags,
    )

    set_safe_cpu_flags()  # the same compiler settings as scripts/train.py
    request_devices(devices)
    import jax

    if setting == "gpu" and jax.default_backend() != "gpu":
        print(f"error: setting gpu asked for but JAX runs on {jax.default_backend()}",
              file=sys.stderr)
        return 2
    enable_compile_cache()
    from jaxrl_sys import agents
    from jaxrl_sys import envs

    results = []
    for case in cases:
        print(f"[{setting}] {case.name}: {seeds} seeds ...", file=sys.stderr, flush=True)
        result = lc.run_case(case, agents.load(case.agent), envs, list(range(seeds)),
                             setting=setting, num_devices=devices, load_agent=agents.load)
        verdict = lc.judge(result)
        print(f"[{setting}] {case.name}: reached {int(verdict.reached.sum())}/{seeds}, "
              f"collapsed {int(verdict.collapsed.sum())}, {result.seconds:.0f} s",
              file=sys.stderr, flush=True)
        results.append(result.to_json())
        Path(out).write_text(json.dumps(results), encoding="utf-8")  # partial results survive
    return 0


def run_settings(settings: list[str], cases: list[lc.LearningCase], seeds: int,
                 jobs: int, workdir: Optional[str] = None,
                 devices: int = 1) -> list[lc.CaseResult]:
    """One worker process per (setting, case), `jobs` at a time; each writes
    `workdir/<setting>__<case>.json`, so an interrupted check keeps what finished."""
    workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="check_learning_"))
    workdir.mkdir(parents=True, exist_ok=True)

    def launch(task: tuple[str, lc.LearningCase]) -> list[lc.CaseResult]:
        setting, case = task
        out = workdir / f"{setting}__{case.name.replace(':', '_')}.json"
        command = [sys.executable, "-m", "jaxrl_sys.commands.check_learning", "--worker", setting, "--cases", case.name,
                   "--seeds", str(seeds), "--devices", str(devices), "--out", str(out)]
        code = subprocess.run(command, env=worker_environment(setting)).returncode
        if code != 0:
            print(f"[{setting}] {case.name}: worker exited with {code}", file=sys.stderr)
        if not out.exists():
            return []
        return [lc.CaseResult.from_json(d) for d in json.loads(out.read_text(encoding="utf-8"))]

    tasks = [(s, c) for c in cases for s in settings]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        per_task = list(pool.map(launch, tasks))
    order = {(r.setting, r.case): r for results in per_task for r in results}
    return [order[(s, c.name)] for c in cases for s in settings if (s, c.name) in order]


def report(results: list[lc.CaseResult], markdown: Optional[str]) -> int:
    """Print a table per case; 1 if any case misses the rule under any setting."""
    tables, failed = [], []
    for case_name in dict.fromkeys(r.case for r in results):
        case = lc.find_case(case_name, all_cases())
        of_case = [r for r in results if r.case == case_name]
        tables.append(lc.format_case_table(case, of_case))
        failed += [f"{case_name} [{r.setting}]" for r in of_case if not lc.judge(r).passed]
    text = "\n\n".join(tables)
    print(text)
    if markdown:
        Path(markdown).write_text(text + "\n", encoding="utf-8")
    print(f"\n{'FAILED: ' + ', '.join(failed) if failed else 'all cases pass'}")
    return 1 if failed else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    # PlacementError: more devices asked for than the worker's backend has
    return guarded(lambda: check(build_parser().parse_args(argv)), (UsageError, PlacementError))


def check(args: argparse.Namespace) -> int:
    cases = parse_cases(args.cases)
    if args.seeds < 1 or args.jobs < 1 or args.devices < 1:
        raise UsageError("--seeds, --jobs and --devices must be >= 1")
    if args.devices > 1:
        from jaxrl_sys import envs

        on_host = [c.name for c in cases if envs.is_host_env(c.env)]
        if on_host:
            raise UsageError(f"--devices needs pure-JAX envs; {', '.join(on_host)} run on the "
                             f"host (leave these cases out)")
    if args.worker is not None:
        return run_worker(args.worker, cases, args.seeds, args.out, args.devices)
    if args.load:
        results = []
        for path in args.load:
            try:
                data = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                raise UsageError(f"cannot read {path}: {error}") from None
            results += [lc.CaseResult.from_json(d) for d in data]
    else:
        settings = parse_settings(args.settings)
        results = run_settings(settings, cases, args.seeds, args.jobs, args.workdir,
                               args.devices)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps([r.to_json() for r in results]) + "\n",
                                       encoding="utf-8")
    if not results:
        print("error: no results", file=sys.stderr)
        return 1
    return report(results, args.markdown)



def entry() -> None:
    """The `jaxrl-check-learning` console entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
