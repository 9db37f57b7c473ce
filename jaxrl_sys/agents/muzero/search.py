"""MuZero's batched tree search (mctx) and the model steps inside the tree.

Three models step the tree (mctx's `recurrent_fn`): the learned dynamics; the learned
dynamics with rule heads, whose predicted episode ends are absorbing and predicted-illegal
moves get no prior; and the real pure-JAX env (AlphaZero). In a two-player zero-sum game
the value after a move is the opponent's, so the tree's discount is -gamma.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from jaxrl_sys.agents.muzero.config import Config
from jaxrl_sys.agents.muzero.networks import MuZeroNetwork, predict_scalar
from jaxrl_sys.core.rollout import legal_actions
from jaxrl_sys.core.types import Env, PyTree
from jaxrl_sys.core.value_transform import Support, logits_to_scalar

RecurrentFn = Callable[..., tuple[mctx.RecurrentFnOutput, Any]]

NO_PRIOR = -1e9  # prior logit of an illegal move inside the tree


@struct.dataclass
class TreeNode:
    """A node of a search that knows where episodes end: the real env's state
    (`model="env"`) or a latent state (learned model with rule heads), whether an episode
    ended on the way from the root, and the value every step below that end carries: 0
    after a termination, the network's value of the position reached at a truncation."""

    state: PyTree
    ended: jax.Array  # bool [B]
    end_value: jax.Array  # float [B]

    @classmethod
    def root(cls, state: PyTree, batch: int) -> "TreeNode":
        """Root nodes [B]: no episode has ended yet."""
        return cls(state, jnp.zeros(batch, bool), jnp.zeros(batch, jnp.float32))


class SearchOutput(NamedTuple):
    """What one batched search gives: the action [B], the policy target [B, A] and the root
    value [B]."""

    action: jax.Array
    policy: jax.Array
    value: jax.Array


def absorbing_output(node: TreeNode, terminated: jax.Array, truncated: jax.Array,
                     reward: jax.Array, policy_logits: jax.Array, value: jax.Array,
                     legal: jax.Array, discount: float
                     ) -> tuple[mctx.RecurrentFnOutput, jax.Array, jax.Array]:
    """The tree's view of one step [B] that knows the rules, and the next nodes' `ended` and
    `end_value` [B]. A terminal step has value 0 and discount 0. A step that crosses the
    env's step bound (`truncated`) ends the branch there, valued by the network at the
    position reached. Below an ended node every step gives reward 0, discount 1 and the
    node's end value, so revisits keep it. Illegal moves ([B, A] mask) get no prior."""
    terminated = terminated & ~node.ended
    value = jnp.where(node.ended, node.end_value, jnp.where(terminated, 0.0, value))
    output = mctx.RecurrentFnOutput(
        reward=jnp.where(node.ended, 0.0, reward),
        discount=jnp.where(node.ended, 1.0, jnp.where(terminated, 0.0, discount)),
        prior_logits=jnp.where(legal, policy_logits, NO_PRIOR),
        value=value,
    )
    return output, node.ended | terminated | truncated, value


def learned_recurrent_fn(params, key: jax.Array, action: jax.Array, latent: jax.Array, *,
                         network: MuZeroNetwork, value_support: Support,
                         reward_support: Support, discount: float
                         ) -> tuple[mctx.RecurrentFnOutput, jax.Array]:
    """One step of the learned model from latents [B, D] by actions [B]: dynamics, then
    prediction; returns mctx's output [B, ...] and the next latents [B, D]."""
    del key
    next_latent, reward_logits, _ = network.apply(
        params, latent, action, method=MuZeroNetwork.dynamics
    )
    policy_logits, value, _ = predict_scalar(network, value_support, params, next_latent)
    output = mctx.RecurrentFnOutput(
        reward=logits_to_scalar(reward_logits, reward_support),
        discount=jnp.full(action.shape, discount, jnp.float32),
        prior_logits=policy_logits,
        value=value,
    )
    return output, next_latent


def ruled_recurrent_fn(params, key: jax.Array, action: jax.Array, node: TreeNode, *,
                       network: MuZeroNetwork, value_support: Support,
                       reward_support: Support, discount: float
                       ) -> tuple[mctx.RecurrentFnOutput, TreeNode]:
    """One step of the learned model with rule heads from nodes [B]: moves it predicts to end
    the episode are absorbing and moves it predicts illegal get no prior, as with the env."""
    del key
    next_latent, reward_logits, end_logit = network.apply(
        params, node.state, action, method=MuZeroNetwork.dynamics
    )
    policy_logits, value, legal_logits = predict_scalar(network, value_support, params,
                                                        next_latent)
    reward = logits_to_scalar(reward_logits, reward_support)
    output, ended, end_value = absorbing_output(
        node, end_logit > 0, jnp.zeros_like(node.ended), reward, policy_logits, value,
        legal_logits > 0, discount)
    return output, TreeNode(next_latent, ended, end_value)


def env_recurrent_fn(params, key: jax.Array, action: jax.Array, node: TreeNode, *,
                     env: Env, network: MuZeroNetwork, value_support: Support,
                     discount: float) -> tuple[mctx.RecurrentFnOutput, TreeNode]:
    """One step of the real env from nodes [B] (AlphaZero): the network only predicts prior
    and value, at the position reached (the env's final observation, not the auto-reset
    game's). Terminal and truncated positions end the branch, so the env's auto-reset inside
    the tree changes nothing."""
    keys = jax.random.split(key, action.shape[0])
    _, state, reward, terminated, truncated, info = jax.vmap(env.step)(keys, node.state,
                                                                      action)
    latent = network.apply(params, info["final_observation"], method=MuZeroNetwork.represent)
    policy_logits, value, _ = predict_scalar(network, value_support, params, latent)
    output, ended, end_value = absorbing_output(
        node, terminated, truncated, reward, policy_logits, value, legal_actions(env, state),
        discount)
    return output, TreeNode(state, ended, end_value)


def bind_recurrent_fn(env: Env, network: MuZeroNetwork, config: Config, value_support: Support,
                      reward_support: Support, discount: float) -> RecurrentFn:
    """mctx's `recurrent_fn(params, key, action, embedding)` for `config.model` and
    `config.rule_heads`, with the network, supports and the tree's discount bound."""
    if config.model == "env":
        return functools.partial(env_recurrent_fn, env=env, network=network,
                                 value_support=value_support, discount=discount)
    step = ruled_recurrent_fn if config.learns_rules else learned_recurrent_fn
    return functools.partial(step, network=network, value_support=value_support,
                             reward_support=reward_support, discount=discount)


def gumbel_qtransform(q_range: float, value_scale: float = 0.1) -> Callable[..., jax.Array]:
    """Gumbel search's Q transform: completed Q min-max rescaled per node (q_range 0, mctx's
    default), or divided by the fixed range `q_range`, which stays well defined with 2
    actions; then scaled by (50 + the most visits) * `value_scale` (the paper's c_scale)."""
    if q_range > 0:
        return functools.partial(mctx.qtransform_completed_by_mix_value, rescale_values=False,
                                 value_scale=value_scale / q_range)
    return functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=value_scale)


def run_search(params, obs: jax.Array, legal: jax.Array, key: jax.Array,
               temperature: float | jax.Array = 1.0, greedy: bool = False,
               env_state: Optional[PyTree] = None, *, network: MuZeroNetwork,
               recurrent_fn: RecurrentFn, config: Config, value_support: Support
               ) -> SearchOutput:
    """One batched search from observations [B, ...] with legal-action masks [B, A].

    Greedy: no root noise and the most-visited/best action (evaluation). Otherwise the
    gumbel noise scale (gumbel) or visit-count temperature (muzero) is `temperature`.
    The env model (`model="env"`) searches from `env_state`, the envs' states [B, ...].
    """
    latent = network.apply(params, obs, method=MuZeroNetwork.represent)
    policy_logits, value, _ = predict_scalar(network, value_support, params, latent)
    if config.model == "env":
        if env_state is None:
            raise ValueError("model='env' searches from env states: pass env_state")
        embedding = TreeNode.root(env_state, obs.shape[0])
    elif config.learns_rules:
        embedding = TreeNode.root(latent, obs.shape[0])
    else:
        embedding = latent
    root = mctx.RootFnOutput(prior_logits=policy_logits, value=value, embedding=embedding)
    invalid = ~legal
    if config.search == "gumbel":
        out = mctx.gumbel_muzero_policy(
            params, key, root, recurrent_fn, config.num_simulations,
            invalid_actions=invalid,
            max_num_considered_actions=min(config.max_considered_actions, legal.shape[-1]),
            gumbel_scale=0.0 if greedy else temperature,
            qtransform=gumbel_qtransform(config.q_range, config.value_scale),
        )
    else:
        out = mctx.muzero_policy(
            params, key, root, recurrent_fn, config.num_simulations,
            invalid_actions=invalid,
            dirichlet_fraction=0.0 if greedy else config.dirichlet_fraction,
            dirichlet_alpha=config.dirichlet_alpha,
            temperature=0.0 if greedy else temperature,
        )
    root_value = out.search_tree.node_values[:, mctx.Tree.ROOT_INDEX]
    return SearchOutput(out.action.astype(jnp.int32), out.action_weights, root_value)


def search_rows(search: Callable[..., SearchOutput], params, obs: jax.Array, legal: jax.Array,
                keys: jax.Array, temperature: float | jax.Array = 1.0, greedy: bool = False,
                env_state: Optional[PyTree] = None) -> SearchOutput:
    """`search` from observations [B, ...] with each row's noise drawn from its own key [B]:
    a row's search does not depend on which rows are searched beside it, so a run is the same
    whether its envs (or sampled rows) sit on one device or are split over many."""

    def one_row(obs, legal, key, env_state):
        """The search of one row, as a batch of one."""
        batch_of_one = lambda x: x[None]  # noqa: E731
        out = search(params, obs[None], legal[None], key, temperature, greedy,
                     jax.tree.map(batch_of_one, env_state))
        return jax.tree.map(lambda x: x[0], out)

    return jax.vmap(one_row)(obs, legal, keys, env_state)


def search_actions(params, obs: jax.Array, key: jax.Array, greedy: bool = False,
                   legal: Optional[jax.Array] = None, temperature: float | jax.Array = 1.0,
                   env_state: Optional[PyTree] = None, *, search: Callable[..., SearchOutput],
                   num_actions: int) -> jax.Array:
    """Actions [B] for observations [B, ...] by `search` (all actions legal if no mask)."""
    if legal is None:
        legal = jnp.ones((obs.shape[0], num_actions), bool)
    return search(params, obs, legal, key, temperature, greedy, env_state).action
