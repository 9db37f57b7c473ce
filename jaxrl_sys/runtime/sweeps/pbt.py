"""PBT's exploit and explore on a group's compiled rows: after every interval's chunk the
bottom members take the whole agent state of top ones and new traced values, without compiling
again (the decisions are `population`'s)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Sequence

import numpy as np

from jaxrl_sys.core.config import field_types
from jaxrl_sys.runtime.execution import copy_agent_rows
from jaxrl_sys.runtime.run_spec import RunSpec
from jaxrl_sys.runtime.sweeps.plan import Group, Plan
from jaxrl_sys.runtime.sweeps.population import (
    MemberHistory, Mutation, Pbt, exploit_sources, explore,
)
from jaxrl_sys.runtime.sweeps.results import SettingResult
from jaxrl_sys.runtime.sweeps.rows import member_rows, member_scores, row_settings


def pbt_step(pbt: Pbt, chunk: int, carry: Any, runner: Any, members: list[int],
             values: list[dict], plan: Plan, group: Group, spec: RunSpec,
             results: list[SettingResult], histories: Sequence[MemberHistory],
             num_seeds: int) -> Any:
    """Exploit and explore after `chunk`: the bottom quantile's rows take the agent state of
    a top member's rows (seed for seed), their values are perturbed or drawn afresh, and the
    runner's traced settings change (no compiling). Decided by a generator seeded with the
    run's seed and the chunk, so a resumed run decides the same."""
    rng = np.random.default_rng([spec.seed, chunk, 0x9B7])
    scores = member_scores(members, results, carry, num_seeds)
    sources = exploit_sources(scores, pbt.quantile, rng)
    fields = field_types(group.config)
    mutations = [Mutation(k.key, k.values, k.scale, k.low, k.high) for k in plan.keys
                 if fields[k.key] is float]

    def valid(candidate: dict) -> bool:
        try:
            dataclasses.replace(group.config, **candidate).validate()
        except ValueError:
            return False
        return True

    for position, source in enumerate(sources):
        if source == position:
            continue
        values[position] = explore(values[source], mutations, pbt.resample_probability, rng,
                                   valid)
        history = histories[members[position]]
        history.copied.append([chunk, members[source]])
        history.schedule.append([chunk + 1, dict(values[position])])
    rows = member_rows(sources, num_seeds)
    runner.run_chunk.set_settings(row_settings(values, group.traced, num_seeds))
    moved = int(np.sum(sources != np.arange(len(members))))
    if spec.progress:
        print(f"pbt after chunk {chunk + 1}: {moved} member(s) copied "
              + ", ".join(f"{members[s]}->{members[p]}" for p, s in enumerate(sources) if s != p),
              file=sys.stderr, flush=True)
    return copy_agent_rows(carry, rows) if moved else carry
