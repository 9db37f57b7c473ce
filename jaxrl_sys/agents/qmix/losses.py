"""QMIX's and VDN's targets and loss as pure functions of replayed team sequences.

A replayed item is `burn_in + seq_length` stored joint steps with the agents' recurrent state
before its first step (`Batch`, [B, L, ...]). The agents' Q-values of the taken actions are
mixed into the team's Q_tot (QMIX's mixer on the world state, or VDN's sum) and regressed on
n-step team returns inside the item (`core.returns.n_step_sequence_targets`), bootstrapped
from the mixed value of each step's next observation: double Q-learning per agent (the online
network picks the best LEGAL next action, the target network values it), mixed by the target
mixer on the next world state. Episodes bootstrap through truncation, not termination.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl_sys.agents.qmix.networks import (
    MonotonicMixer, TeamQNetwork, masked_argmax, mix, next_team_q, unroll,
)
from jaxrl_sys.core.returns import n_step_sequence_targets


@struct.dataclass
class Batch:
    """Sampled replay items, batch-major [B, L, ...]: each step's team observations [N, D],
    actions [N], team reward, end flags, next observations (pre-reset) [N, D] and their legal
    actions [N, A]; QMIX's world states [S] before and after the step (None for VDN); whether
    a step begins an episode and the state before the first step [B, N, ...] (None when
    feed-forward)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    final_legal: jax.Array
    world: Optional[jax.Array] = None
    final_world: Optional[jax.Array] = None
    starts: Optional[jax.Array] = None
    memory: Any = None

    @classmethod
    def from_items(cls, items: dict) -> Batch:
        """The batch of gathered replay `items` (a dict with a key per stored field).

        Args:
            items: field name -> leaves [B, L, ...] (the state before the first step [B, N, ...]).

        Returns:
            The batch.
        """
        return cls(**items)


def time_major(x: Optional[jax.Array]) -> Optional[jax.Array]:
    """[B, L, ...] as [L, B, ...] (None stays None).

    Args:
        x: [B, L, ...] leaves, or None.

    Returns:
        [L, B, ...], or None.
    """
    return None if x is None else jnp.swapaxes(x, 0, 1)


def taken_q(q: jax.Array, actions: jax.Array) -> jax.Array:
    """Q-values [...] of int `actions` [...] in `q` [..., A].

    Args:
        q: [..., A] Q-values.
        actions: [...] int actions.

    Returns:
        [...] Q-values.
    """
    return jnp.take_along_axis(q, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def double_q_next_values(q_target_next: jax.Array, q_online_next: Optional[jax.Array],
                         next_legal: jax.Array) -> jax.Array:
    """Each agent's value [...] of its next observation from Q-values [..., A]: the target
    network's at the legal action the online network ranks best (double Q), or at the target
    network's own best legal action when `q_online_next` is None.

    Args:
        q_target_next: [..., A] the target network's Q-values (e.g. [T, B, N, A]).
        q_online_next: [..., A] the online network's, or None.
        next_legal: bool [..., A] legal next actions.

    Returns:
        [...] values.
    """
    chooser = q_target_next if q_online_next is None else q_online_next
    return taken_q(q_target_next, masked_argmax(chooser, next_legal))


def team_targets(next_q_tot: jax.Array, rewards: jax.Array, terminated: jax.Array,
                 truncated: jax.Array, n_step: int, gamma: float) -> jax.Array:
    """n-step team targets [T, B] of the steps [T, B] of sequences from the mixed value of
    each step's next observation [T, B]; no gradient flows through them.

    Args:
        next_q_tot: [T, B] mixed values of each step's next observation.
        rewards: [T, B] team rewards.
        terminated: bool [T, B].
        truncated: bool [T, B].
        n_step: the horizon.
        gamma: the discount.

    Returns:
        [T, B] targets.
    """
    targets = n_step_sequence_targets(rewards, next_q_tot, terminated, truncated, n_step, gamma)
    return jax.lax.stop_gradient(targets)


def qmix_loss(params: Any, target_params: Any, batch: Batch, *, network: TeamQNetwork,
              mixer: Optional[MonotonicMixer], burn_in: int, n_step: int, gamma: float,
              double_q: bool) -> tuple[jax.Array, dict]:
    """The mean squared team TD error [] over the learned steps of sequences [B, L, ...], with
    metrics (mean taken agent Q, mean Q_tot). `params` and `target_params` are
    {"agent": ..., "mixer": ...} (no "mixer" for VDN); differentiate with respect to
    `params`.

    Args:
        params: the online {"agent": ..., "mixer": ...} parameters.
        target_params: the target ones.
        batch: sequences [B, L, ...] of L = burn_in + T steps.
        network: the agents' Q-network.
        mixer: QMIX's mixer, or None (VDN: a sum).
        burn_in: the steps that only warm the recurrent state.
        n_step: the targets' horizon.
        gamma: the discount.
        double_q: whether the online network picks the next actions.

    Returns:
        loss: the scalar loss.
        metrics: scalars `q_mean` and `q_tot_mean`.
    """
    obs, starts = time_major(batch.obs), time_major(batch.starts)
    q, carries = unroll(network, params["agent"], batch.memory, obs, starts, burn_in)
    target_carries = None
    if carries is not None:
        _, target_carries = unroll(network, target_params["agent"], batch.memory, obs, starts,
                                   burn_in)
    learned = lambda x: None if x is None else time_major(x)[burn_in:]  # noqa: E731
    final_obs = learned(batch.final_obs)
    q_target_next = next_team_q(network, target_params["agent"], target_carries, final_obs)
    q_online_next = None
    if double_q:
        q_online_next = next_team_q(network, jax.lax.stop_gradient(params["agent"]),
                                    jax.lax.stop_gradient(carries), final_obs)
    next_values = double_q_next_values(q_target_next, q_online_next,
                                       learned(batch.final_legal))
    next_q_tot = mix(mixer, target_params.get("mixer"), next_values,
                     learned(batch.final_world))
    targets = team_targets(next_q_tot, learned(batch.reward), learned(batch.terminated),
                           learned(batch.truncated), n_step, gamma)
    chosen = taken_q(q, learned(batch.action))
    q_tot = mix(mixer, params.get("mixer"), chosen, learned(batch.world))
    loss = jnp.mean(jnp.square(q_tot - targets))
    return loss, {"q_mean": jnp.mean(chosen), "q_tot_mean": jnp.mean(q_tot)}
