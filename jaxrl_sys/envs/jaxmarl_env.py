"""JaxMARL's multi-agent envs (`jaxmarl:<env>`, `jaxmarl:SMAX:<map>`) with the agents on a
leading array axis: cooperative teams, and MPE's competitive tasks of teams against each other.

JaxMARL keeps observations, actions, rewards and dones in dictionaries keyed by agent name and
resets on `dones["__all__"]` without keeping the last observation. This adapter gives the
interface of every other env here, with agents as axis 0 (a homogeneous team; heterogeneous
observation and action sizes padded, the padding masked out of the legal actions):

- `reset(key) -> obs [N, D], state`; `step(key, state, actions [N]) -> obs [N, D], state,
  team reward, terminated, truncated, info` with gymnax-style auto-reset and
  `info["final_observation"]` [N, D], `info["final_world_state"]` [S] and
  `info["final_legal_actions"]` [N, A] (of the state reached, before the reset);
- `legal_actions(state) -> bool [N, A]`: JaxMARL's avail actions (all legal where the env has
  none), so masked sampling and masked argmax read one array;
- continuous actions where every agent's action space is the same box (MPE's
  `action_type="Continuous"`, `--set env.action_type=Continuous`): actions [N, A] in the box,
  a `Box` action space in the spec, and no legal actions;
- `world_state(state) -> [S]`: SMAX's `world_state`, or (MPE and the rest) every agent's
  observation concatenated: what a centralised critic or a QMIX mixer conditions on.

The team reward is the sum of the agents' rewards (MPE's "team-sum return"). On the competitive
MPE tasks (`COMPETITIVE`: predator-prey `MPE_simple_tag_v3`, `MPE_simple_adversary_v3`,
`MPE_simple_push_v3`) an agent's team is its name without the index ("adversary", "agent"),
declared in `EnvSpec.teams`; each team's reward is its agents' sum, `info["team_rewards"]` [K]
holds them, `info["team_episode_return"]` [K] each team's return of an episode that ended
(0 elsewhere), and the scalar reward is the first team's (the adversaries'). JaxMARL marks only
`done`; an episode that reaches the env's step limit is truncated (bootstrapped through), any
earlier end terminated. SMAX defaults to the settings of JaxMARL's SMAX baselines
(`SMAX_DEFAULTS`). SMAX's evaluation variant (`make_eval`) rewards 1 for a won battle and
nothing else, so its greedy evaluation return is the win rate.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl_sys.core.types import Box, Discrete, EnvSpec
from jaxrl_sys.envs.errors import EnvParamError, UnknownEnvError

PREFIX = "jaxmarl:"
SMAX_FAMILY = "SMAX"
# JaxMARL's SMAX baselines all set these (baselines/*/config/*smax*.yaml)
SMAX_DEFAULTS = {"see_enemy_actions": True, "walls_cause_death": True, "attack_mode": "closest"}
# MPE's discrete tasks of teams against each other, agents named "<team>_<index>"
COMPETITIVE = ("MPE_simple_tag_v3", "MPE_simple_adversary_v3", "MPE_simple_push_v3")
REWARDS = ("team", "win")  # training: the agents' rewards summed; "win": 1 for a won SMAX battle


@struct.dataclass
class MultiAgentState:
    """JaxMARL's state, the steps taken in the current episode, and its world state (kept, as
    computing it again can mean computing every observation again)."""

    inner: Any
    steps: jax.Array  # int32
    world: jax.Array  # float32 [S]
    team_returns: Optional[jax.Array] = None  # float32 [K], competitive envs only


def _import_jaxmarl():
    """jaxmarl, imported without its start-up chatter on stdout. An import inside it puts
    `sys.stdout` and `sys.stderr` back to the process's own streams (undoing any capture, such
    as pytest's) before jaxmarl prints, so the file descriptor is silenced and the streams
    restored."""
    if "jaxmarl" not in sys.modules:
        streams = sys.stdout, sys.stderr
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 1)
                import jaxmarl  # noqa: F401
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
            sys.stdout, sys.stderr = streams
    import jaxmarl

    return jaxmarl


def _smax_maps() -> list[str]:
    from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

    return sorted(MAP_NAME_TO_SCENARIO)


class JaxMarlEnv:
    """A JaxMARL env with its agents stacked on axis 0; a static object of pure functions."""

    def __init__(self, env_id: str, smax_map: str | None = None, reward: str = "team",
                 **env_kwargs: Any) -> None:
        jaxmarl = _import_jaxmarl()
        if reward not in REWARDS:
            raise EnvParamError(f"{PREFIX}{env_id}: reward must be one of {', '.join(REWARDS)}, "
                                f"got {reward!r}")
        if reward == "win" and smax_map is None:
            raise EnvParamError(f"{PREFIX}{env_id}: reward='win' is for SMAX battles only")
        if smax_map is not None:
            from jaxmarl.environments.smax import map_name_to_scenario

            if smax_map not in _smax_maps():
                raise UnknownEnvError(f"unknown SMAX map {smax_map!r}; maps: "
                                      f"{', '.join(_smax_maps())}")
            env_kwargs = {"scenario": map_name_to_scenario(smax_map), **SMAX_DEFAULTS,
                          **env_kwargs}
            name, jaxmarl_id = f"{PREFIX}{SMAX_FAMILY}:{smax_map}", "HeuristicEnemySMAX"
        else:
            name, jaxmarl_id = f"{PREFIX}{env_id}", env_id
        self.inner = jaxmarl.make(jaxmarl_id, **_checked(name, jaxmarl_id, env_kwargs))
        self.smax = smax_map is not None
        self.reward = reward
        self.agents = list(self.inner.agents)
        self.teams = (tuple(a.rsplit("_", 1)[0] for a in self.agents)
                      if jaxmarl_id in COMPETITIVE else ())
        self.team_names = tuple(dict.fromkeys(self.teams))
        action_space = _action_space(name, [self.inner.action_spaces[a] for a in self.agents])
        self.continuous = isinstance(action_space, Box)
        self.action_sizes = tuple(int(s.n) if hasattr(s, "n") else 0
                                  for s in (self.inner.action_spaces[a] for a in self.agents))
        self.obs_sizes = tuple(
            int(jnp.prod(jnp.asarray(self.inner.observation_spaces[a].shape)))
            for a in self.agents)
        self.obs_dim = max(self.obs_sizes)
        # the steps an episode lasts at most: MPE ends after the step that begins with
        # `step == max_steps` (26 steps for 25), the others at `max_steps`
        self.max_steps = int(self.inner.max_steps) + (1 if jaxmarl_id.startswith("MPE") else 0)
        world = jax.eval_shape(lambda: self._world_state(self.inner.reset(jax.random.PRNGKey(0))))
        self.spec = EnvSpec(
            name=name, obs_shape=(len(self.agents), self.obs_dim), obs_dtype="float32",
            action_space=action_space, max_episode_steps=self.max_steps,
            num_agents=len(self.agents), state_shape=tuple(world.shape), teams=self.teams)

    @property
    def unwrapped(self) -> "JaxMarlEnv":
        return self

    def __repr__(self) -> str:
        return f"JaxMarlEnv({self.spec.name!r})"

    def reset(self, key: jax.Array) -> tuple[jax.Array, MultiAgentState]:
        """A fresh episode: observations [N, D]."""
        obs, inner = self.inner.reset(key)
        team_returns = jnp.zeros(len(self.team_names), jnp.float32) if self.teams else None
        return self._stack(obs), MultiAgentState(inner, jnp.zeros((), jnp.int32),
                                                 self._world_state((obs, inner)), team_returns)

    def step(self, key: jax.Array, state: MultiAgentState, actions: jax.Array):
        """Every agent acts (`actions` [N], or [N, A] in the box of a continuous env); team
        reward (competitive: the first team's, and every team's in `info`); auto-reset with the
        final observation [N, D], world state [S] and (discrete) legal actions [N, A] in
        `info`."""
        step_key, reset_key = jax.random.split(key)
        acts = {a: actions[i] for i, a in enumerate(self.agents)}
        obs, inner, rewards, dones, _ = self.inner.step_env(step_key, state.inner, acts)
        steps = state.steps + 1
        truncated = steps >= self.max_steps  # the time limit, ours and JaxMARL's alike
        done = dones["__all__"] | truncated
        terminated = done & ~truncated
        if self.reward == "win":
            reward = (done & self._won(inner)).astype(jnp.float32)
        elif self.teams:
            team_rewards = self._team_rewards(rewards)
            reward = team_rewards[0]
        else:
            reward = sum(rewards[a] for a in self.agents).astype(jnp.float32)
        final_obs = self._stack(obs)
        final_world = self._world_state((obs, inner))
        fresh_obs, fresh = self.reset(reset_key)
        team_returns = None if not self.teams else state.team_returns + team_rewards
        after = MultiAgentState(inner, steps, final_world, team_returns)
        next_state = jax.tree.map(lambda a, b: jnp.where(done, a, b), fresh, after)
        info = {"final_observation": final_obs, "final_world_state": final_world}
        if not self.continuous:
            info["final_legal_actions"] = self.legal_actions(after)
        if self.teams:
            info["team_rewards"] = team_rewards
            info["team_episode_return"] = jnp.where(done, team_returns, 0.0)
        return (jnp.where(done, fresh_obs, final_obs), next_state, reward, terminated, truncated,
                info)

    def _team_rewards(self, rewards: dict) -> jax.Array:
        """[K]: each team's reward, the sum of its agents'."""
        return jnp.stack([
            sum(rewards[a] for a, t in zip(self.agents, self.teams) if t == team)
            for team in self.team_names]).astype(jnp.float32)

    def legal_actions(self, state: MultiAgentState) -> jax.Array:
        """bool [N, A]: each agent's available actions (JaxMARL's, or all of its own); discrete
        action spaces only."""
        if self.continuous:
            raise TypeError(f"{self.spec.name}: continuous actions have no legal-action masks")
        sizes = jnp.asarray(self.action_sizes)[:, None]
        own = jnp.arange(self.spec.action_space.n)[None, :] < sizes
        try:
            avail = self.inner.get_avail_actions(state.inner)
        except NotImplementedError:
            return own
        rows = [jnp.pad(jnp.asarray(avail[a], jnp.bool_), (0, self.spec.action_space.n - n))
                for a, n in zip(self.agents, self.action_sizes)]
        return jnp.stack(rows) & own

    def world_state(self, state: MultiAgentState) -> jax.Array:
        """[S]: the global state a centralised critic or a mixer reads."""
        return state.world

    def _world_state(self, obs_and_inner: tuple[dict, Any]) -> jax.Array:
        obs, inner = obs_and_inner
        if hasattr(self.inner, "get_world_state"):  # SMAX
            return jnp.asarray(self.inner.get_world_state(inner), jnp.float32).reshape(-1)
        return self._stack(obs).reshape(-1)

    def _stack(self, obs: dict) -> jax.Array:
        """The agents' observations as one float32 array [N, D], zero-padded to the widest."""
        rows = [jnp.asarray(obs[a], jnp.float32).reshape(-1) for a in self.agents]
        return jnp.stack([jnp.pad(r, (0, self.obs_dim - r.shape[0])) for r in rows])

    def _won(self, inner: Any) -> jax.Array:
        """A SMAX battle won: every enemy dead and an ally alive."""
        smax_state = getattr(inner, "state", inner)
        allies = self.inner.num_allies
        alive = smax_state.unit_alive
        return ~jnp.any(alive[allies:]) & jnp.any(alive[:allies])


def _action_space(name: str, spaces: list[Any]) -> "Discrete | Box":
    """The team's action space: discrete (the largest agent's, the others' padded and masked)
    or one box every agent shares; a one-line UnknownEnvError for anything else."""
    if all(hasattr(s, "n") for s in spaces):
        return Discrete(max(int(s.n) for s in spaces))
    boxes = {(tuple(s.shape),
              tuple(float(x) for x in np.broadcast_to(np.asarray(s.low), s.shape).reshape(-1)),
              tuple(float(x) for x in np.broadcast_to(np.asarray(s.high), s.shape).reshape(-1)))
             for s in spaces if hasattr(s, "low")}
    if len(boxes) != 1 or any(hasattr(s, "n") for s in spaces):
        raise UnknownEnvError(f"{name}: only discrete actions, or one continuous box shared by "
                              "every agent, are supported")
    (shape, low, high), = boxes
    if len(shape) != 1:
        raise UnknownEnvError(f"{name}: continuous actions must be vectors, got shape {shape}")
    return Box(shape, low, high)


def make(name: str, **params: Any) -> JaxMarlEnv:
    """`jaxmarl:<env id>` or `jaxmarl:SMAX:<map>` (against JaxMARL's heuristic enemy), `params`
    to JaxMARL's constructor (and `reward`: "team" or "win"); one-line errors."""
    rest = name[len(PREFIX):]
    if not rest:
        raise UnknownEnvError(f"{name!r} names no JaxMARL env")
    if rest.startswith(f"{SMAX_FAMILY}:"):
        _import_jaxmarl()
        return JaxMarlEnv(SMAX_FAMILY, smax_map=rest[len(SMAX_FAMILY) + 1:], **params)
    jaxmarl = _import_jaxmarl()
    from jaxmarl.registration import registered_envs

    supported = [e for e in registered_envs if _cooperative(e) or e in COMPETITIVE]
    if rest not in supported:
        import difflib

        close = difflib.get_close_matches(rest, supported, n=3)
        hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(supported[:6])}, ..."
        raise UnknownEnvError(f"unknown JaxMARL env {rest!r} (SMAX maps: jaxmarl:SMAX:<map>); "
                              f"{hint}")
    del jaxmarl
    return JaxMarlEnv(rest, **params)


def _checked(name: str, jaxmarl_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """`params` if every one is a constructor argument of the JaxMARL env (its classes pass
    unknown keywords on and drop them silently); else a one-line EnvParamError."""
    import inspect

    from jaxmarl import registration

    classes = type(registration.make(jaxmarl_id)).__mro__
    if jaxmarl_id == "HeuristicEnemySMAX":  # its keywords go on to SMAX's constructor
        from jaxmarl.environments.smax.smax_env import SMAX

        classes += SMAX.__mro__
    known = {p for c in classes if "__init__" in c.__dict__
             for p in inspect.signature(c.__init__).parameters}
    known -= {"self", "args", "kwargs", "env_kwargs"}
    unknown = sorted(set(params) - known)
    if unknown:
        raise EnvParamError(f"{name} has no param {', '.join(unknown)}; it takes "
                            f"{', '.join(sorted(known))}")
    return params


def _cooperative(env_id: str) -> bool:
    """JaxMARL ids this adapter serves as one team: discrete, cooperative ones (SMAX goes by
    map)."""
    return env_id.startswith("MPE_simple") and env_id not in (
        "MPE_simple_tag_v3", "MPE_simple_world_comm_v3", "MPE_simple_adversary_v3",
        "MPE_simple_crypto_v3", "MPE_simple_push_v3") or env_id == "switch_riddle"
