"""Replay throughput: `python benchmarks/bench_replay.py` (or `replay_throughput()` from bench.py).

Times a jitted `lax.scan` of add-one-row + sample-a-batch steps on a prefilled buffer of
num_envs * capacity items (1M by default), for uniform and prioritised replay; each figure
is the median of `repeats` timed calls after a warm-up call, so compilation is excluded.
"""

from __future__ import annotations

import sys

from timing import median_seconds


def _example_transition() -> dict:
    import jax.numpy as jnp

    return {
        "obs": jnp.zeros((4,), jnp.float32),
        "action": jnp.zeros((), jnp.int32),
        "reward": jnp.zeros((), jnp.float32),
        "terminated": jnp.zeros((), jnp.bool_),
        "truncated": jnp.zeros((), jnp.bool_),
        "next_obs": jnp.zeros((4,), jnp.float32),
    }


def replay_throughput(
    num_envs: int = 64,
    capacity: int = 16_384,
    batch_size: int = 256,
    steps: int = 1_000,
    repeats: int = 3,
    with_update: bool = True,
) -> dict[str, float]:
    """Added and sampled transitions/s for uniform and prioritised replay on the default device.

    Each scan step adds one row (num_envs transitions) and samples `batch_size` items; with
    `with_update` a third figure also times prioritised add + sample + update_priorities.
    Keys: "<kind>_added_per_s", "<kind>_sampled_per_s", "<kind>_steps_per_s".
    """
    import jax
    import jax.numpy as jnp

    from jaxrl_sys.core import replay

    example = _example_transition()
    full = jnp.full((num_envs,), capacity, jnp.int32)

    def row(t: jax.Array) -> dict:
        value = t.astype(jnp.float32)
        return jax.tree.map(
            lambda x: jnp.broadcast_to(value, (num_envs,) + x.shape).astype(x.dtype), example
        )

    def uniform_step(state, t, key):
        state = replay.add(state, row(t))
        batch, _ = replay.sample(state, key, batch_size)
        return state, batch["reward"].sum()

    def prioritized_step(state, t, key):
        state = replay.add_prioritized(state, row(t))
        batch, _, weights = replay.sample_prioritized(state, key, batch_size, beta=0.4)
        return state, batch["reward"].sum() + weights.sum()

    def prioritized_update_step(state, t, key):
        state = replay.add_prioritized(state, row(t))
        batch, index, weights = replay.sample_prioritized(state, key, batch_size, beta=0.4)
        state = replay.update_priorities(state, index, batch["reward"] + weights, alpha=0.6)
        return state, weights.sum()

    def make_run(step_fn):
        def run(state, key):
            def body(state, t):
                return step_fn(state, t, jax.random.fold_in(key, t))

            return jax.lax.scan(body, state, jnp.arange(steps))

        return jax.jit(run, donate_argnums=0)

    uniform_state = replay.init(example, num_envs, capacity).replace(size=full)
    prioritized_state = replay.init_prioritized(example, num_envs, capacity)
    leaves = jnp.zeros(prioritized_state.tree.shape[:1] + (prioritized_state.tree.shape[1] // 2,))
    leaves = leaves.at[:, :capacity].set(1.0)
    prioritized_state = prioritized_state.replace(
        replay=prioritized_state.replay.replace(size=full),
        tree=replay._tree_from_leaves(leaves),
    )

    cases = [
        ("uniform", uniform_step, uniform_state),
        ("prioritized", prioritized_step, prioritized_state),
    ]
    if with_update:
        cases.append(("prioritized_update", prioritized_update_step, prioritized_state))
    results: dict[str, float] = {}
    key = jax.random.PRNGKey(0)
    for name, step_fn, state in cases:
        run = make_run(step_fn)
        holder = [jax.tree.map(jnp.copy, state)]

        def call() -> None:
            holder[0], out = run(holder[0], key)
            jax.block_until_ready(out)

        seconds = median_seconds(call, repeats)
        results[f"{name}_steps_per_s"] = steps / seconds
        results[f"{name}_added_per_s"] = steps * num_envs / seconds
        results[f"{name}_sampled_per_s"] = steps * batch_size / seconds
    return results


def replay_table(repeats: int = 3) -> list[str]:
    """Markdown rows for 1M-item uniform and prioritised buffers."""
    num_envs, capacity, batch_size = 64, 16_384, 256
    results = replay_throughput(num_envs, capacity, batch_size, repeats=repeats)
    rows = [
        f"{num_envs} envs x {capacity} = {num_envs * capacity:,} items, batch {batch_size}, one "
        "row of 64 transitions added and one batch sampled per step\n",
        "| buffer | add+sample steps/s | added transitions/s | sampled transitions/s |",
        "|---|---:|---:|---:|",
    ]
    for kind in ("uniform", "prioritized", "prioritized_update"):
        steps, added, sampled = (
            results[f"{kind}_{what}_per_s"] for what in ("steps", "added", "sampled")
        )
        rows.append(f"| {kind} | {steps:,.0f} | {added:,.0f} | {sampled:,.0f} |")
    return rows


def main() -> int:
    from jaxrl_sys.runtime.devices import describe, set_safe_cpu_flags

    set_safe_cpu_flags()
    print(f"# replay bench: {describe()}\n")
    print("\n".join(replay_table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
