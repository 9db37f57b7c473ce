"""Benchmark the shipped defaults against published returns: `python scripts/benchmark.py --suite minatar`.

    python scripts/benchmark.py --suite classic --agents ppo,dqn,sac --seeds 4
    python scripts/benchmark.py --suite minatar --agents ppo --seeds 4   # 10M steps per game
    python scripts/benchmark.py --suite minatar --agents ppo --envs Freeway-MinAtar  # one game
    python scripts/benchmark.py --suite classic --quick                  # a short smoke run
    python scripts/benchmark.py --suite minatar --report                 # tables of saved rows
    python scripts/benchmark.py --page                   # docs/results.md from results/*.json
    python scripts/benchmark.py --defaults-table         # docs/family-defaults.md from the registry

Trains every suited (agent, env) pair of the suite with the env's default config (what
`train.py --env X` trains), seeds vmapped, evaluates greedily at every chunk end, and writes
`results/<suite>.json` (every seed's curves, saved after each run: an interrupted suite
continues where it stopped), `results/<suite>.md` (the table: mean ± std over seeds against
the reference, its ratio, seconds and env-steps/s) and `results/<suite>.png` (curves with the
reference as a dashed line). References and their sources: `jaxrl_sys/tools/references.json`.
`--page` writes the docs site's results page from every suite's saved rows (and copies their
curves beside it), so the tables there are generated, not typed.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from jaxrl_sys.runtime.cli import Parser, UsageError, console_entry, guarded
from jaxrl_sys.tools import benchmark as bm  # imports JAX lazily
from jaxrl_sys.tools import family_defaults as fd


def registered_agents() -> list[str]:
    """The agent registry's names (imports no agent)."""
    from jaxrl_sys import agents

    return agents.names()


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="classic", help=f"{', '.join(bm.SUITES)} or all")
    p.add_argument("--agents", default="all",
                   help="comma-separated agents of the registry, or all "
                        f"({', '.join(registered_agents())}); each runs on the suite's envs "
                        "it suits")
    p.add_argument("--envs", default="",
                   help="comma-separated envs of the suite to run (default: all of them); "
                        "suites run in separate processes share one results file safely")
    p.add_argument("--seeds", type=int, default=4, help="seeds 0..N-1, vmapped")
    p.add_argument("--devices", type=int, default=1, help="devices for data-parallel learning")
    p.add_argument("--quick", action="store_true",
                   help=f"at most {bm.QUICK_STEPS:,} env steps per run (a smoke test); "
                        "results go to <suite>_quick.*")
    p.add_argument("--out-dir", default="results", help="where <suite>.json/.md/.png go")
    p.add_argument("--fresh", action="store_true",
                   help="re-run rows already saved in <suite>.json for the same seeds")
    p.add_argument("--report", action="store_true",
                   help="write the table and curves of the saved rows; train nothing")
    p.add_argument("--page", nargs="?", const=str(bm.RESULTS_PAGE), default=None,
                   metavar="PAGE",
                   help="write the docs results page (default %(const)s) from every suite's "
                        "<out-dir>/<suite>.json; train nothing")
    p.add_argument("--defaults-table", nargs="?", const=str(fd.PAGE), default=None,
                   metavar="PAGE",
                   help="write the page of each agent's defaults per env family (default "
                        "%(const)s) from the registry; train nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def benchmark(args: argparse.Namespace) -> int:
    """Train a suite (or, with --report, read its saved rows) and write its table and curves;
    with --page, write the docs results page from every saved suite instead."""
    if args.seeds < 1:
        raise UsageError(f"--seeds must be >= 1, got {args.seeds}")
    if args.devices < 1:
        raise UsageError(f"--devices must be >= 1, got {args.devices}")
    if args.defaults_table is not None:
        page = write_defaults_table(Path(args.defaults_table))
        print(f"wrote {page}", file=sys.stderr)
        return 0
    if args.page is not None:
        page = bm.write_results_page(Path(args.out_dir), Path(args.page))
        print(f"wrote {page}", file=sys.stderr)
        return 0
    name = f"{args.suite}_quick" if args.quick else args.suite
    out_dir = Path(args.out_dir)
    results_file = out_dir / f"{name}.json"
    references = bm.load_references()
    if args.report:
        rows = bm.load_rows(results_file)
    else:
        from jaxrl_sys.runtime.devices import enable_compile_cache, request_devices

        request_devices(args.devices)  # the XLA:CPU flags of scripts/train.py too
        enable_compile_cache()
        from jaxrl_sys import agents
        from jaxrl_sys import envs

        agent_names = (agents.names() if args.agents.strip() == "all"
                       else [a.strip() for a in args.agents.split(",") if a.strip()])
        if not agent_names:
            raise UsageError("--agents is empty")
        only_envs = [e.strip() for e in args.envs.split(",") if e.strip()]
        entries, skipped = bm.plan(args.suite, agent_names, agents.load, envs, args.quick,
                                   only_envs)
        for line in skipped:
            print(f"left out: {line}", file=sys.stderr)
        print(f"suite {args.suite}: {len(entries)} runs x {args.seeds} seeds -> {results_file}",
              file=sys.stderr)
        rows = bm.run_suite(entries, agents.load, envs, list(range(args.seeds)), results_file,
                            num_devices=args.devices, fresh=args.fresh, agent_order=agents.names(),
                            progress=None if args.no_progress else _progress_bar())
    table_file, image_file = bm.write_report(rows, references, out_dir, name)
    print(bm.format_table(rows, references))
    print(f"wrote {results_file}, {table_file}, {image_file}", file=sys.stderr)
    return 0


def write_defaults_table(page: Path) -> Path:
    """Write the page of every registered agent's defaults per env family."""
    from jaxrl_sys import agents
    from jaxrl_sys import envs

    rows = fd.table(agents.names(), agents.catalog, envs, envs.FAMILIES)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(fd.format_page(rows, envs.FAMILIES), encoding="utf-8")
    return page


def _progress_bar():
    """A tqdm bar per run, labelled with the run and the suite's ETA."""
    from tqdm import tqdm

    state: dict = {}

    def progress(label: str, done: int, total: int) -> None:
        if state.get("label") != label:
            if "bar" in state:
                state["bar"].close()
            state["bar"] = tqdm(total=total, desc=label, unit="chunk", file=sys.stderr)
            state["label"] = label
        bar = state["bar"]
        bar.update(done - bar.n)
        if done == total:
            bar.close()

    return progress


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit code: 0 done, 2 bad input, 130 interrupted."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    from jaxrl_sys import agents
    from jaxrl_sys import envs

    return guarded(lambda: benchmark(build_parser().parse_args(argv)),
                   (UsageError, bm.BenchmarkError) + agents.USER_ERRORS + envs.USER_ERRORS)


def entry() -> None:
    """The `jaxrl-benchmark` console entry point (exit code: `main`'s)."""
    console_entry(main)


if __name__ == "__main__":
    entry()
