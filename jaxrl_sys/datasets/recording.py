"""Recording a policy's episodes on device: every env plays its first episode, step by step,
and the host cuts each one at its end.

The arrays follow Minari's episode layout: observations [T + 1, ...] (the last one is where
the episode ended, the env's `final_observation`), and actions, rewards, terminations and
truncations [T] kept apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_sys.core.evaluation import Policy, stateful
from jaxrl_sys.core.rollout import has_legal_actions, legal_actions, per_env_keys, reset_envs, step_envs
from jaxrl_sys.core.types import Box, Env, EnvSpec, RecurrentPolicy


@dataclasses.dataclass(frozen=True)
class Episode:
    """One recorded episode of T steps, as Minari keeps it (host arrays)."""

    observations: np.ndarray  # [T + 1, ...]: the last is the observation the episode ended in
    actions: np.ndarray  # [T, ...]
    rewards: np.ndarray  # [T] float32
    terminations: np.ndarray  # [T] bool: True at most at the last step
    truncations: np.ndarray  # [T] bool: True at most at the last step

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def total_return(self) -> float:
        """The sum of the episode's rewards."""
        return float(np.sum(self.rewards, dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class RecordedSteps:
    """Every step of N envs over `max_episode_steps` steps (device or host arrays)."""

    observations: Any  # [N, T, ...]: the observation each action was taken in
    actions: Any  # [N, T, ...]
    rewards: Any  # [N, T]
    terminations: Any  # [N, T] bool
    truncations: Any  # [N, T] bool
    final_observations: Any  # [N, T, ...]: where the step ended (before an auto-reset)


jax.tree_util.register_dataclass(
    RecordedSteps, data_fields=[f.name for f in dataclasses.fields(RecordedSteps)],
    meta_fields=[])


class KeyedPolicy(RecurrentPolicy):
    """A recording policy whose randomness is drawn per row from the row's episode id:
    `step(params, memory, obs, starts, key, episode_ids=None, **context)`, `episode_ids` [B]
    (`record_steps` passes them; without them, the rows' indices), so that an episode's noise
    does not depend on the batch it is played in."""


def row_keys(key: jax.Array, batch: int, episode_ids: Optional[jax.Array]) -> jax.Array:
    """One key per row [B]: `key` folded with each row's episode id (its index without)."""
    ids = jnp.arange(batch, dtype=jnp.int32) if episode_ids is None else episode_ids
    return per_env_keys(key, ids)


def with_epsilon(policy: Union[Policy, RecurrentPolicy], spec: EnvSpec,
                 epsilon: float) -> KeyedPolicy:
    """`policy` with exploration noise: a uniformly random (legal) action with probability
    `epsilon` for discrete actions; for a `Box`, Gaussian noise of standard deviation
    `epsilon` times the half-range added to the action, clipped to the bounds. Each row's
    noise comes from its episode id.

    Args:
        policy: the policy to perturb.
        spec: the env's spec (its action space).
        epsilon: the noise's size, in [0, 1].

    Returns:
        The perturbed policy.
    """
    recurrent = stateful(policy)

    def step(params, memory, obs, starts, key, episode_ids=None, **context):
        """The policy's actions [B, ...], perturbed row by row."""
        policy_key, noise_key = jax.random.split(key)
        actions, memory = recurrent.step(params, memory, obs, starts, policy_key, **context)
        keys = row_keys(noise_key, obs.shape[0], episode_ids)
        if isinstance(spec.action_space, Box):
            low = jnp.asarray(spec.action_space.low, jnp.float32)
            high = jnp.asarray(spec.action_space.high, jnp.float32)
            normal = jax.vmap(lambda k: jax.random.normal(k, actions.shape[1:]))(keys)
            noise = normal * epsilon * (high - low) / 2
            return jnp.clip(actions + noise, low, high).astype(actions.dtype), memory
        legal = context.get("legal")
        if legal is None:
            legal = jnp.ones((actions.shape[0], spec.action_space.n), bool)

        def perturbed(k: jax.Array, action: jax.Array, allowed: jax.Array) -> jax.Array:
            """A random allowed action with probability epsilon, else `action`."""
            pick_key, random_key = jax.random.split(k)
            random = jax.random.categorical(random_key, jnp.where(allowed, 0.0, -jnp.inf))
            return jnp.where(jax.random.uniform(pick_key) < epsilon,
                             random.astype(action.dtype), action)

        return jax.vmap(perturbed)(keys, actions, legal), memory

    return KeyedPolicy(initial=recurrent.initial, step=step)


def record_steps(env: Env, policy: Union[Policy, RecurrentPolicy], params: Any,
                 key: jax.Array, episode_ids: jax.Array) -> RecordedSteps:
    """`max_episode_steps` steps of one env per id in `episode_ids` [N], acting with `policy`
    (called as `core.evaluation.evaluate` calls it; a `KeyedPolicy` also gets the ids), so
    every env's first episode ends within them. Episodes are keyed by id, as evaluation's are:
    an episode is the same in whatever batch it is played. Jittable.

    Args:
        env: the env (auto-resetting, with `final_observation` in its info).
        policy: `policy(params, obs, key, **context) -> actions`, or a `RecurrentPolicy`.
        params: what `policy` takes first.
        key: a PRNG key.
        episode_ids: [N] int32 ids.

    Returns:
        The steps, [N, T, ...] each.
    """
    reset_key, run_key = jax.random.split(key)
    policy = stateful(policy)
    num = episode_ids.shape[0]
    state = reset_envs(env, reset_key, episode_ids).replace(
        memory=policy.initial(num), starts=jnp.ones(num, jnp.bool_))

    def body(vstate, t):
        act_key, step_key = jax.random.split(jax.random.fold_in(run_key, t))
        context = {"env_state": vstate.env_state}
        if has_legal_actions(env):
            context["legal"] = legal_actions(env, vstate.env_state)
        if isinstance(policy, KeyedPolicy):
            context["episode_ids"] = vstate.env_ids
        actions, memory = policy.step(params, vstate.memory, vstate.obs, vstate.starts,
                                      act_key, **context)
        next_vstate, result = step_envs(env, vstate, actions, step_key)
        next_vstate = next_vstate.replace(memory=memory,
                                          starts=result.terminated | result.truncated)
        final = result.info["final_observation"]
        return next_vstate, (vstate.obs, actions, result.reward, result.terminated,
                             result.truncated, final)

    _, steps = jax.lax.scan(body, state, jnp.arange(env.spec.max_episode_steps))
    steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), steps)  # [T, N] -> [N, T]
    return RecordedSteps(*steps)


def first_episodes(steps: RecordedSteps) -> list[Episode]:
    """Each env's first episode out of `record_steps`' host arrays: its steps up to and
    including the first that terminated or was truncated, and the observation it ended in.

    Args:
        steps: [N, T, ...] host arrays.

    Returns:
        N episodes; an env whose first episode did not end within T steps (an env without a
        time limit) gives its T steps, truncated at the last.
    """
    episodes = []
    ends = np.asarray(steps.terminations) | np.asarray(steps.truncations)
    for i in range(ends.shape[0]):
        where = np.flatnonzero(ends[i])
        last = int(where[0]) if where.size else ends.shape[1] - 1
        truncations = np.array(steps.truncations[i, :last + 1], bool)
        truncations[-1] |= not where.size
        episodes.append(Episode(
            observations=np.concatenate([steps.observations[i, :last + 1],
                                         steps.final_observations[i, last:last + 1]]),
            actions=np.asarray(steps.actions[i, :last + 1]),
            rewards=np.asarray(steps.rewards[i, :last + 1], np.float32),
            terminations=np.array(steps.terminations[i, :last + 1], bool),
            truncations=truncations))
    return episodes


class RecordingError(ValueError):
    """A policy that cannot be recorded as asked; the message is one line."""


POLICY_KINDS = ("greedy", "sampled", "epsilon")


def parse_policy(text: str) -> tuple[str, float]:
    """A recording policy as `jaxrl-record --policy` takes it: "greedy", "sampled" or
    "epsilon:E" with E in [0, 1] -> (kind, E); RecordingError otherwise."""
    if text in ("greedy", "sampled"):
        return text, 0.0
    kind, _, value = text.partition(":")
    try:
        epsilon = float(value) if kind == "epsilon" else -1.0
    except ValueError:
        epsilon = -1.0
    if not 0.0 <= epsilon <= 1.0:
        raise RecordingError(f"expected greedy, sampled or epsilon:E with E in [0, 1], got "
                             f"{text!r}")
    return "epsilon", epsilon


def behaviour_policy(module: Any, agent: Any, agent_state: Any, kind: str, epsilon: float,
                     env_steps: int) -> tuple[RecurrentPolicy, Any]:
    """The policy to record and what it takes first: the agent's greedy policy on its state,
    the greedy one `with_epsilon`, or ("sampled") its host-loop act, the exploring policy, at
    the schedule's point after `env_steps` steps, on its actor parameters.

    Args:
        module: the agent's package (the agent contract; `host_fns` for "sampled").
        agent: the bound agent.
        agent_state: one seed's agent state.
        kind: "greedy", "sampled" or "epsilon".
        epsilon: the noise of "epsilon".
        env_steps: the env steps the state was trained for (the exploration schedule's clock).

    Returns:
        (policy, params) for `record_steps`.
    """
    if kind != "sampled":
        policy = module.greedy_action(agent)
        if kind == "epsilon":
            policy = with_epsilon(policy, agent.spec, epsilon)
        return stateful(policy), agent_state
    if not hasattr(module, "host_fns"):
        raise RecordingError("this agent has no exploring policy outside training: record "
                             "its greedy policy, or greedy with epsilon:E")
    fns = module.host_fns(agent)
    if fns.initial_memory is not None:
        raise RecordingError("the sampled policy is recorded for feed-forward agents only")

    def sampled(params, memory, obs, starts, key, episode_ids=None, legal=None,
                env_state=None):
        """The exploring policy's actions [B], each row's key from its episode id, and the
        id's env lane in training (`env id mod num_envs`: per-env exploration such as
        Ape-X's epsilons stays within what training used)."""
        del starts, legal, env_state
        ids = (jnp.arange(obs.shape[0], dtype=jnp.int32) if episode_ids is None
               else episode_ids)
        actions, _ = fns.act(params, obs, row_keys(key, obs.shape[0], ids),
                             jnp.int32(env_steps), ids % fns.num_envs)
        return actions, memory

    return KeyedPolicy(initial=lambda batch: None, step=sampled), fns.actor_params(agent_state)


def record_episodes(env: Env, policy: Union[Policy, RecurrentPolicy], params: Any,
                    key: jax.Array, count: int, batch: int = 64) -> list[Episode]:
    """`count` episodes of `policy` (ids 0..count-1), played `batch` at a time on device.

    Args:
        env: the env.
        policy: the policy to record.
        params: what `policy` takes first.
        key: a PRNG key (episode i's randomness is its id's, as in evaluation).
        count: episodes to record.
        batch: episodes per device call.

    Returns:
        The episodes, in id order.
    """
    if env.spec.max_episode_steps < 1:
        raise RecordingError(f"{env.spec.name} has no episode bound (max_episode_steps "
                             f"{env.spec.max_episode_steps}): recording plays episodes to "
                             "their end within it")
    play = jax.jit(lambda state, ids: record_steps(env, policy, state, key, ids))
    episodes: list[Episode] = []
    for start in range(0, count, batch):
        ids = jnp.arange(start, start + batch, dtype=jnp.int32)
        episodes += first_episodes(jax.device_get(play(params, ids)))
    return episodes[:count]
