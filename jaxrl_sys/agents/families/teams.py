"""What the team agents (MAPPO and IPPO, QMIX and VDN, MADDPG) share, written once: the agents'
one-hot ids that let one set of parameters serve every agent, the check that an env is a team,
and, for teams that compete (predator-prey), a policy per team: parameters stacked on a team
axis [K, ...], gathered per agent, each team with its own optimiser (RLlib's policy mapping)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from jaxrl_sys.core import collectives
from jaxrl_sys.core.config import ConfigError, check_choice
from jaxrl_sys.core.types import EnvSpec, Metrics, PyTree


def with_agent_ids(x: jax.Array) -> jax.Array:
    """Inputs [..., N, D] with each agent's one-hot id appended: [..., N, D + N].

    Args:
        x: [..., N, D] inputs of N agents.

    Returns:
        [..., N, D + N] inputs, `x`'s dtype.
    """
    agents = x.shape[-2]
    ids = jnp.broadcast_to(jnp.eye(agents, dtype=x.dtype), (*x.shape[:-2], agents, agents))
    return jnp.concatenate([x, ids], axis=-1)


def check_team(spec: EnvSpec, competing: bool = False, continuous: bool = False) -> None:
    """One line unless `spec` is a team of agents with discrete actions (or continuous ones,
    where the agent takes them), and unless it is one cooperative team where the agent does
    not take `competing` teams.

    Args:
        spec: the env's spec.
        competing: whether the agent learns a policy per team where teams compete.
        continuous: whether the agent takes continuous (box) actions too.
    """
    if spec.num_agents < 2:
        raise ConfigError(f"{spec.name} is not a multi-agent env (jaxmarl:<env>, "
                          "jaxmarl:SMAX:<map>)")
    if not spec.discrete and not continuous:
        raise ConfigError(f"{spec.name} has continuous actions and this agent takes discrete "
                          "ones: use maddpg, mappo or ippo, or the env's discrete actions")
    if spec.team_names and not competing:
        raise ConfigError(f"{spec.name} has teams that compete ({', '.join(spec.team_names)}) "
                          "and this agent learns one team's reward: use mappo or ippo with "
                          "policies=by_team")


# ------------------------------------------------------------------ policies by team (competitive)

POLICIES = ("shared", "by_team")  # one policy for every agent, or one per team


def check_policy_fields(config: Any) -> None:
    """One line unless a config's `policies` is known and `frozen_teams` comes with
    `policies="by_team"` (what can be checked before the env is known).

    Args:
        config: a Config with `policies` and `frozen_teams`.
    """
    check_choice(config, "policies", POLICIES)
    if config.frozen_teams and config.policies != "by_team":
        raise ConfigError("frozen_teams needs policies=by_team")


def check_policies(spec: EnvSpec, policies: str, frozen_teams: tuple[str, ...]) -> None:
    """One line unless `policies` and `frozen_teams` fit the env's teams: competing teams need
    a policy each (`by_team`), `by_team` needs teams, frozen teams must exist and one must
    learn.

    Args:
        spec: the env's spec (`teams`).
        policies: "shared" or "by_team".
        frozen_teams: names of the teams whose policy stays at its initialisation.
    """
    names = spec.team_names
    if names and policies != "by_team":
        raise ConfigError(f"{spec.name} has teams that compete ({', '.join(names)}): set "
                          "policies=by_team (a policy per team)")
    if policies == "by_team" and not names:
        raise ConfigError(f"policies=by_team needs an env of competing teams (jaxmarl:"
                          f"MPE_simple_tag_v3, ...); {spec.name} is one team")
    unknown = [t for t in frozen_teams if t not in names]
    if unknown:
        raise ConfigError(f"frozen_teams names {', '.join(unknown)}, not a team of {spec.name}"
                          f" (teams: {', '.join(names) or 'none'})")
    if names and set(frozen_teams) >= set(names):
        raise ConfigError(f"frozen_teams freezes every team of {spec.name}: none would learn")


def learning_teams(spec: EnvSpec, frozen_teams: tuple[str, ...]) -> tuple[bool, ...]:
    """[K] whether each team learns (is not frozen), in `spec.team_names`' order.

    Args:
        spec: the env's spec.
        frozen_teams: names of the frozen teams.

    Returns:
        One bool per team.
    """
    return tuple(team not in frozen_teams for team in spec.team_names)


def greedy_agents(spec: EnvSpec, frozen_teams: tuple[str, ...]) -> "bool | tuple[bool, ...]":
    """Who acts greedily in evaluation: every agent (True), or, with frozen teams, [N] the
    agents of learning teams; a frozen team samples its initial policy (a random opponent).

    Args:
        spec: the env's spec.
        frozen_teams: names of the frozen teams.

    Returns:
        True, or one bool per agent.
    """
    if not frozen_teams:
        return True
    return tuple(team not in frozen_teams for team in spec.teams)


def team_agents(agent_teams: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Each team's agent indices (static, for slicing [..., N, ...]).

    Args:
        agent_teams: [N] each agent's team index (`EnvSpec.agent_teams`).

    Returns:
        One tuple of agent indices per team, in team order.
    """
    return tuple(tuple(i for i, k in enumerate(agent_teams) if k == team)
                 for team in range(max(agent_teams, default=-1) + 1))


def init_per_team(init: Callable[[jax.Array], PyTree], key: jax.Array, teams: int) -> PyTree:
    """`teams` independent initialisations stacked on a leading team axis [K, ...].

    Args:
        init: `init(key) -> params`.
        key: a PRNG key, split once per team.
        teams: K.

    Returns:
        Parameters with leaves [K, ...].
    """
    return jax.vmap(init)(jax.random.split(key, teams))


def per_agent(params: PyTree, agent_teams: tuple[int, ...]) -> PyTree:
    """Per-team parameters [K, ...] gathered to each agent's team's [N, ...].

    Args:
        params: leaves [K, ...].
        agent_teams: [N] each agent's team index.

    Returns:
        Leaves [N, ...].
    """
    index = jnp.asarray(agent_teams)
    return jax.tree.map(lambda p: p[index], params)


def per_team_optimizer(optimizer: optax.GradientTransformation,
                       learning: tuple[bool, ...]) -> optax.GradientTransformation:
    """`optimizer` run separately for each team's parameters [K, ...] (its own moments and
    gradient clipping), with the updates of teams that do not learn (`learning` [K] False)
    zeroed, so a frozen team keeps its initial policy.

    Args:
        optimizer: one team's optimiser.
        learning: whether each team learns.

    Returns:
        The optimiser over [K, ...] parameters.
    """
    learns = jnp.asarray(learning, jnp.float32)

    def update(grads: PyTree, state: PyTree, params: PyTree = None):
        updates, state = jax.vmap(optimizer.update)(grads, state, params)
        scale = lambda u: u * learns.reshape(-1, *([1] * (u.ndim - 1)))  # noqa: E731
        return jax.tree.map(scale, updates), state

    return optax.GradientTransformation(jax.vmap(optimizer.init), update)


@dataclasses.dataclass(frozen=True)
class PerTeam:
    """A module over a whole team's inputs ([B, N, ...] in, [B, N, ...] out) with a set of
    parameters per team, stacked [K, ...]: `apply` runs every team's parameters on all the
    agents and keeps, for each agent, its own team's output (K passes: for networks that read
    the team together, such as MADDPG's centralised critics). `init` and `apply` mirror the
    module's."""

    module: nn.Module
    agent_teams: tuple[int, ...]

    def init(self, key: jax.Array, *args: Any) -> PyTree:
        """Each team's parameters of `module.init(key, *args)`, stacked [K, ...].

        Args:
            key: a PRNG key, split once per team.
            *args: the module's inputs.

        Returns:
            Parameters with leaves [K, ...].
        """
        return init_per_team(lambda k: self.module.init(k, *args), key,
                             max(self.agent_teams) + 1)

    def apply(self, params: PyTree, *args: Any) -> jax.Array:
        """The module's output with each agent's entries from its own team's parameters.

        Args:
            params: leaves [K, ...].
            *args: the module's inputs, the team's agents on axis 1.

        Returns:
            [B, N, ...]: agent n's entries from its team's parameters.
        """
        outputs = jax.vmap(lambda p: self.module.apply(p, *args))(params)  # [K, B, N, ...]
        agents = jnp.arange(len(self.agent_teams))
        # the two index arrays, split by a slice, lead the result: [N, B, ...]
        return jnp.moveaxis(outputs[jnp.asarray(self.agent_teams), :, agents], 0, 1)


def team_return_metrics(team_sums: jax.Array, episode_count: jax.Array,
                        names: tuple[str, ...], axis_name: Optional[str]) -> Metrics:
    """Each team's mean return of the episodes that ended, `return_<team>` (NaN where none
    did), from sums [..., K] of `info["team_episode_return"]` over steps and envs.

    Args:
        team_sums: [..., K] team returns of ended episodes, summed over leading axes here.
        episode_count: the episodes that ended, summed over devices already.
        names: the teams' names.
        axis_name: the device axis to sum over, or None.

    Returns:
        One scalar per team.
    """
    sums = collectives.psum(team_sums.reshape(-1, len(names)).sum(axis=0), axis_name)
    return {f"return_{name}": sums[k] / episode_count for k, name in enumerate(names)}
