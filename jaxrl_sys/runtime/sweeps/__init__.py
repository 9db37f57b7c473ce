"""Hyper-parameter sweeps compiled into one program: settings x seeds as one vmapped axis.

    python scripts/train.py --agent ppo --seeds 4 \\
        --sweep learning_rate=1e-3,2.5e-3 --sweep ent_coef=0,0.01      # a grid: 4 settings
    python scripts/train.py --agent ppo --sweep learning_rate=log:1e-4:1e-2 --samples 8

Every (setting, seed) pair is a row of one compiled program (`execution.place_rows`), and the
rows are split over `--devices`. A float hyper-parameter reaches the agent as a traced value
of its own config object, so the learning code is the one a single run uses. A key that
changes array shapes or the program (hidden sizes, num_envs, flags, ints) splits the sweep
into compiled groups, run one after another; so does a float the agent branches on in
Python (found by tracing, before anything is compiled).

The run directory holds run.json, `sweep.json` (every row's curves, saved after every
chunk), `sweep.md` (one ranked row per setting) and `sweep.png`, and a checkpoint directory
per group (`group-<k>/checkpoints`), so `--resume` continues where a sweep stopped.

The modules, each one job:

    keys        the `--sweep` flags parsed and expanded into settings; SweepError
    plan        the settings checked as configs, grouped by compiled program; what is refused
    trace       which swept floats the agent takes as traced values
    memory      the rows' memory checked before compiling
    rows        a group's rows (seeds, traced values) and its compiled runner
    record      what each chunk adds to the results
    run         `sweep()`: everything checked, then each group trained
    population  PBT's and halving's decisions and records (lineage, sweep.md, sweep.png)
    pbt         PBT's exploit and explore on the compiled rows
    halving     successive halving's rungs on the compiled rows
    results     the results: curves per setting, the ranked table, sweep.json and sweep.png
    saved       a trained sweep's groups and settings reopened (evaluate.py, arena.py)

The names below are imported from their modules on first use (`sweeps.sweep`, `from
jaxrl_sys.runtime.sweeps import open_setting`), so that importing one module of the package
(population's NumPy rules, the results) imports no JAX: benchmarks/tune_pbt.py's Tune side
ranks members with them in a process that never computes.
"""

from __future__ import annotations

from jaxrl_sys.core.lazy import lazy_exports

_PUBLIC = {
    "SweepError": ".keys",
    "SweepKey": ".keys",
    "expand": ".keys",
    "parse_sweep_key": ".keys",
    "available_bytes": ".memory",
    "check_memory": ".memory",
    "row_bytes": ".memory",
    "Group": ".plan",
    "Plan": ".plan",
    "check_spec": ".plan",
    "group_settings": ".plan",
    "plan_sweep": ".plan",
    "Halving": ".population",
    "MemberHistory": ".population",
    "Pbt": ".population",
    "SettingResult": ".results",
    "SweepOutcome": ".results",
    "describe_setting": ".results",
    "load_outcome": ".results",
    "save_outcome": ".results",
    "batching": ".rows",
    "group_runner": ".rows",
    "sweep": ".run",
    "SavedGroup": ".saved",
    "SavedSetting": ".saved",
    "open_groups": ".saved",
    "open_setting": ".saved",
    "traceable_keys": ".trace",
}

__all__ = sorted(_PUBLIC)


__getattr__, __dir__ = lazy_exports(__name__, _PUBLIC)
