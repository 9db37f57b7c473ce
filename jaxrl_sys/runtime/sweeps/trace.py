"""Which swept floats a compiled group can take as traced values: the agent's init and train
step are traced (not compiled) with them as tracers; one the agent branches on in Python, or
uses as a shape, fails to trace and splits the sweep into a program per value."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import jax.numpy as jnp

from jaxrl_sys.runtime.execution import DEVICE_AXIS, placement_fns
from jaxrl_sys.runtime.sweeps.plan import Plan


def traceable_keys(plan: Plan, module: Any, env: Any) -> tuple[str, ...]:
    """The swept float keys the agent accepts as traced values: for each, its init and train
    step are traced (not compiled) with that key as a tracer; one the agent branches on in
    Python, or uses as a shape, raises and is kept static (a compiled group per value)."""
    config = plan.configs[0]
    env_ids = jnp.arange(config.num_envs, dtype=jnp.int32)

    def traces(keys: Sequence[str]) -> bool:
        """Whether init and one train step trace with `keys` as tracers."""
        def one_step(values: jax.Array) -> Any:
            agent = module.make(env, dataclasses.replace(
                config, **{k: values[i] for i, k in enumerate(keys)}))
            init_fn, step_fn = placement_fns(agent)
            state, env_state = init_fn(jax.random.PRNGKey(0), env_ids)
            return step_fn(state, env_state, jax.random.PRNGKey(1))

        values = jnp.asarray([[getattr(config, k) for k in keys]], jnp.float32)
        try:
            jax.eval_shape(jax.vmap(one_step, axis_name=DEVICE_AXIS), values)
        except (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                jax.errors.TracerIntegerConversionError, TypeError):
            return False
        return True

    if not plan.float_keys or traces(plan.float_keys):  # one trace when all of them can
        return tuple(plan.float_keys)
    return tuple(k for k in plan.float_keys if traces([k]))
