"""Successive halving over a group's settings: each rung trains its members to its end, then
the best ceil(n / eta) go on with their whole state, in a program compiled for their rows."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxrl_sys.runtime import driver
from jaxrl_sys.runtime.checkpoint import Checkpointer
from jaxrl_sys.runtime.loops import chunking
from jaxrl_sys.runtime.run_spec import EnvRegistry, ResolvedRun
from jaxrl_sys.runtime.sweeps.plan import Group, Plan
from jaxrl_sys.runtime.sweeps.population import Halving, rung_ends, survivors
from jaxrl_sys.runtime.sweeps.record import chunk_recorder, forget_after
from jaxrl_sys.runtime.sweeps.results import SettingResult
from jaxrl_sys.runtime.sweeps.rows import group_runner, member_rows, member_scores, row_seeds


def train_halving(group: Group, plan: Plan, resolved: ResolvedRun, registry: EnvRegistry,
                  env: Any, seeds: list[int], run_dir: Path, results: list[SettingResult],
                  save: Callable[[], None], halving: Halving) -> float:
    """Successive halving over one group's settings: each rung trains its members to its
    end, then the best ceil(n / eta) go on with their whole state. The rows change at every
    rung, so each rung is a program of its own (compiled when it starts)."""
    spec = resolved.spec
    iters, num_chunks = chunking(group.config.num_iterations, spec.chunks)
    ends = rung_ends(num_chunks, len(group.members), halving.eta)
    counts = [len(group.members)]
    for _ in ends[1:]:
        counts.append(-(-counts[-1] // halving.eta))
    members = list(group.members)
    checkpointer = Checkpointer(run_dir / f"group-{group.index}", keep=spec.keep_checkpoints,
                                save_replay=spec.save_replay)
    carry, runner, start_chunk, seconds_before = None, None, 0, 0.0

    def runner_for(rung_members: list[int]) -> Any:
        return group_runner(dataclasses.replace(group, members=tuple(rung_members)), plan,
                            resolved, registry, env, len(seeds), iters)

    if checkpointer.latest_chunk() is not None:
        members = list(checkpointer.read_record()["members"])
        runner = runner_for(members)
        carry, record = checkpointer.restore(runner.init(row_seeds(seeds, members)))
        start_chunk = int(record["chunk"]) + 1
        seconds_before = float(record.get("train_seconds", 0.0))
        print(f"halving: resuming after chunk {start_chunk - 1}", file=sys.stderr)
    forget_after(start_chunk, [results[m] for m in group.members], ())
    clock = {"seconds": seconds_before}
    try:
        for rung, (end, count) in enumerate(zip(ends, counts)):
            if start_chunk >= end:
                continue
            if len(members) > count:  # the rung before has ended: keep its best
                keep = survivors(member_scores(members, results, carry, len(seeds)), halving.eta)
                rows = member_rows(keep, len(seeds))
                members = [members[i] for i in keep]
                runner = runner_for(members)
                carry = jax.device_put(jax.tree.map(lambda x: np.asarray(x)[rows], carry),
                                       runner.carry_sharding())
                if spec.progress:
                    print(f"halving: rung {rung + 1}/{len(ends)} keeps settings "
                          f"{', '.join(map(str, members))}", file=sys.stderr, flush=True)
            runner = runner or runner_for(members)
            on_chunk = chunk_recorder(members, seeds, results,
                                      iters * group.config.steps_per_iteration,
                                      clock["seconds"], clock, save, spec.progress,
                                      f"rung {rung + 1}/{len(ends)}", num_chunks)
            rung_members = list(members)

            def on_checkpoint(chunk: int, carry: Any) -> None:
                checkpointer.save(chunk, carry, {"train_seconds": clock["seconds"],
                                                 "members": rung_members})

            trained = driver.train(runner, row_seeds(seeds, members), end, on_chunk,
                                   carry=carry, start_chunk=start_chunk,
                                   checkpoint_every=spec.checkpoint_every,
                                   on_checkpoint=on_checkpoint, check=lambda summary: None)
            carry, start_chunk = trained.carry, end
            if spec.progress:
                print(f"halving: rung {rung + 1}/{len(ends)} ({len(members)} settings) compiled "
                      f"in {trained.compile_seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        checkpointer.close()
    return clock["seconds"] - seconds_before
