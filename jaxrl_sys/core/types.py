"""Types shared by environments, agents, the loops and the run layer.

An environment is a static object of pure functions (`reset`, `step`) plus an `EnvSpec`;
agents build their networks from the spec alone, so they never import a particular env.
`AgentDef` is the contract every agent module keeps; `HostFns` and `Rollout` are what an agent
gives the host loop and gets from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional, Protocol, Union, runtime_checkable

import jax

PyTree = Any
Metrics = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Discrete:
    """A discrete action space with actions 0..n-1."""

    n: int


@dataclasses.dataclass(frozen=True)
class Box:
    """A continuous action space: a float vector bounded element-wise by `low` and `high`."""

    shape: tuple[int, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]


ActionSpace = Union[Discrete, Box]


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What an agent needs to know about an environment to build itself.

    `num_players` 2 means alternating two-player zero-sum self-play: observation and reward are
    from the view of the player who moves, and the agent picks the moves of both sides.
    `num_agents` > 1 is a cooperative team acting at once: observations [N, ...] (`obs_shape`
    starts with N), actions [N], one team reward, and a global state of `state_shape` for
    centralised critics and mixers (`jaxrl_sys.envs.jaxmarl_env`).
    `mirror_axes` names the observation axes whose reversal, with the order of the discrete
    actions reversed, maps the game onto itself (a board's mirror image); () declares none.
    `teams` names each agent's team where agents compete in teams (predator-prey): the scalar
    reward is then the first team's, and `info["team_rewards"]` [K] holds every team's; ()
    is one cooperative team.
    """

    name: str
    obs_shape: tuple[int, ...]
    obs_dtype: str
    action_space: ActionSpace
    max_episode_steps: int
    num_players: int = 1
    num_agents: int = 1
    state_shape: tuple[int, ...] = ()
    mirror_axes: tuple[int, ...] = ()
    teams: tuple[str, ...] = ()

    @property
    def team_names(self) -> tuple[str, ...]:
        """The competing teams in order of their first agent; () for one cooperative team.

        Returns:
            The distinct names in `teams`, in order.
        """
        return tuple(dict.fromkeys(self.teams))

    @property
    def agent_teams(self) -> tuple[int, ...]:
        """Each agent's team as an index into `team_names`; () for one cooperative team.

        Returns:
            [N] team indices.
        """
        return tuple(self.team_names.index(t) for t in self.teams)

    @property
    def discrete(self) -> bool:
        """Whether the action space is `Discrete`.

        Returns:
            True for a `Discrete` action space, False for a `Box`.
        """
        return isinstance(self.action_space, Discrete)


class Env(Protocol):
    """A pure-JAX environment with gymnax 1.x semantics and auto-reset.

    `step` returns `obs, state, reward, terminated, truncated, info`; when an episode ends the
    returned `obs`/`state` already belong to the next episode and `info["final_observation"]`
    holds the last observation of the finished one (needed to bootstrap through truncation).

    An env with a discrete action space MAY also define `legal_actions(state) -> bool[n]`, the
    legal-action mask of the state's player to move (board games); without it every action is
    legal (see `jaxrl_sys.core.rollout.legal_actions`).
    """

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[jax.Array, PyTree]:
        """A new episode's first observation and state.

        Args:
            key: a PRNG key.

        Returns:
            obs: the observation, of `spec.obs_shape`.
            state: the env state (a pytree).
        """

    def step(
        self, key: jax.Array, state: PyTree, action: jax.Array
    ) -> tuple[jax.Array, PyTree, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """One step of one env, auto-resetting where the episode ends.

        Args:
            key: a PRNG key.
            state: the env state.
            action: a scalar int for a `Discrete` space ([N] for a team of N), floats of
                `action_space.shape` for a `Box`.

        Returns:
            obs: the next observation, of `spec.obs_shape` (the next episode's first where this
                one ended).
            state: the next env state (likewise).
            reward: scalar reward (a team's one reward).
            terminated: bool scalar.
            truncated: bool scalar.
            info: arrays, `final_observation` among them.
        """


class Rollout(NamedTuple):
    """T vector steps of B envs, time-major [T, B, ...].

    `next_obs[t]` is the observation that followed `obs[t]` in the same episode: the episode's
    last observation where it ended at step t (never the next episode's first).
    """

    obs: Any
    action: Any
    reward: Any
    terminated: Any
    truncated: Any
    next_obs: Any
    extras: dict  # what `act` returned besides the action (e.g. log-probs, values)
    env_ids: Any = None  # [B] int32 global ids of the envs (the learner's rows of them)


class HostFns(NamedTuple):
    """What an agent gives the host loop; every function is jitted by the loop.

    init(key) -> (agent_state, replay)        replay may be None
    actor_params(agent_state) -> params        what `act` needs, published every update
    act(params, obs, keys, env_steps, env_ids) -> (action, extras)
        obs [B, ...] of the envs of global ids env_ids [B]; keys [B]: one per env, from its
        id (so actions do not depend on how envs are split over actor threads or devices);
        env_steps: env steps (over all envs) taken before this step, for schedules
    A recurrent agent sets `initial_memory(num_envs) -> memory [B, ...]`, and its act is then
    act(params, obs, keys, env_steps, env_ids, memory, starts) -> (action, extras, memory)
        memory: its state before the step, starts bool [B]: the observations that begin an
        episode (the loop resets the memory of ended envs to the initial state itself)
    learn(agent_state, replay, rollout, key) -> (agent_state, replay, metrics)
        this learner device's rows of the rollout [T, B_local, ...] (`rollout.env_ids`: their
        global ids) and of the replay; gradients `pmean`-ed over the "device" axis; replay
        is donated (updated in place)
    """

    init: Callable[[jax.Array], tuple[PyTree, PyTree]]
    actor_params: Callable[[PyTree], PyTree]
    act: Callable[[PyTree, jax.Array, jax.Array, jax.Array], tuple[jax.Array, dict]]
    learn: Callable[[PyTree, PyTree, Rollout, jax.Array], tuple[PyTree, PyTree, Metrics]]
    num_envs: int
    rollout_steps: int
    initial_memory: Optional[Callable[[int], PyTree]] = None


@dataclasses.dataclass(frozen=True)
class BoundAgent:
    """What every agent module's `make(env, config)` returns: pure functions bound to one env
    and config (each agent's `Agent` adds its networks and functions of its own, as keywords
    after these seven, which come in this order).

    init(key) -> state                                  learner state: params, optimiser, ...
    init_envs(key, env_ids) -> env_state                envs (and replay rows) of these ids
    act(params, obs, key, ...) -> action (and what the learner needs)
    update(state, batch, ...) -> (state, metrics, ...)  one learning step on given data
    train_step(state, env_state, key) -> (state, env_state, metrics)   collect and learn
    """

    config: Any
    spec: EnvSpec
    init: Callable[..., PyTree]
    init_envs: Callable[..., PyTree]
    act: Callable[..., Any]
    update: Callable[..., Any]
    train_step: Callable[..., tuple[PyTree, PyTree, Metrics]]


class RecurrentPolicy(NamedTuple):
    """A greedy policy that carries state from step to step (a recurrent agent's), for
    evaluation, rendering and play; a feed-forward policy is a plain function instead.

    initial(batch) -> memory [B, ...]                        the state every episode starts in
    step(params, memory, obs, starts, key, legal=None, env_state=None) -> (actions, memory)
        acts on observations [B, ...]; rows whose `starts` [B] is True begin an episode, and
        their memory is reset before the step
    """

    initial: Callable[[int], PyTree]
    step: Callable[..., tuple[jax.Array, PyTree]]


@dataclasses.dataclass(frozen=True)
class DatasetRecipe:
    """How an offline agent's learning check gets its data: the shipped defaults of `agent`
    train on the promise's env (seed 0), then `episodes` episodes of its `policy` (as
    `jaxrl-record --policy` takes it: greedy, sampled or epsilon:E) are recorded."""

    agent: str
    policy: str = "greedy"
    episodes: int = 50


@dataclasses.dataclass(frozen=True)
class LearningPromise:
    """An env that an agent's shipped defaults learn, and the bar its learning check holds them
    to (`jaxrl_sys.tools.learning_check` turns each into a case; the learning tests run them).

    `eval_episodes` > 0 judges the greedy policy, evaluated at the end of every
    `eval_every`-th chunk; 0 judges the mean return of the training episodes of each chunk.
    `overrides` ((field, value) pairs) go on top of the shipped defaults; empty means none.
    `env_params` ((name, value) pairs) go to the env's constructor, as `--set env.<name>=value`
    does (MPE's continuous actions).
    `test_seeds`: seeds 0..n-1 that tests/test_learning.py trains it on (seed 0 alone: the
    smallest run that shows the defaults learn); 0 where a test of its own trains it (a slow
    case: the host loop, MuZero), or where the suite leaves it to
    `jaxrl-check-learning` (a further env on a code path that another of the agent's promises
    already trains in the suite); `note` names that test or the results file. An offline
    agent's promise names the `dataset` it learns from (a `DatasetRecipe`).
    """

    env: str
    threshold: float
    eval_episodes: int = 32
    eval_every: int = 1
    overrides: tuple[tuple[str, Any], ...] = ()
    chunks: int = 20
    note: str = ""
    test_seeds: int = 1
    dataset: Optional[DatasetRecipe] = None
    env_params: tuple[tuple[str, Any], ...] = ()


# What an agent learns to play (`AgentDef.PLAYS`): one agent's view of an env; two-player
# zero-sum games (EnvSpec.num_players == 2) by self-play, one network on both sides, with
# legal-move masks; a cooperative team (EnvSpec.num_agents > 1) and nothing else.
PLAYS = ("single", "self_play", "team")
# Whether an agent's network is recurrent (`AgentDef.MEMORY`): never; when its config's
# `memory` is "gru" or "lstm"; always.
MEMORY = ("none", "optional", "always")


@runtime_checkable
class AgentDef(Protocol):
    """What an agent package (jaxrl_sys/agents/<name>/) provides; the run layer uses nothing
    else, and `jaxrl_sys.agents.load` returns it as this type (a test checks every registered
    agent against it).

    `make(env, config)` binds the pure functions to an env and a config. The bound agent has
    `init(key) -> state`, `init_envs(key, env_ids) -> env_state` and
    `train_step(state, env_state, key) -> (state, env_state, metrics)`: collect on device and
    learn, for the device loop (`jaxrl_sys.runtime.execution.placement_fns` places them). Its collectives
    run over `axis_name` where that axis is bound and are no-ops elsewhere, so the same
    functions run under a user's plain `jit`/`vmap`.
    """

    DEFAULT_ENV: str  # what `--env` defaults to
    DEFAULT_EVAL_EPISODES: int  # greedy evaluation episodes per chunk (0: training returns)
    PROMISES: tuple[LearningPromise, ...]  # envs its defaults learn: the learning checks' cases
    PLAYS: str  # what it learns to play, one of `PLAYS`
    MEMORY: str  # whether its network is recurrent, one of `MEMORY`

    def default_config(self, env_name: str) -> Any:
        """The frozen Config whose defaults solve `env_name` (`validate()` checks it).

        Args:
            env_name: the env id.

        Returns:
            The agent's Config.
        """

    def make(self, env: Env, config: Any, axis_name: Optional[str] = "device") -> BoundAgent:
        """The agent's pure functions bound to `env` and `config`.

        Args:
            env: the env.
            config: the agent's Config.
            axis_name: the device axis of its collectives (no-ops where it is not bound), or None.

        Returns:
            The bound agent.
        """

    def greedy_action(self, agent: Any) -> Union[Callable[..., jax.Array], RecurrentPolicy]:
        """policy(state, obs, key, legal=None, env_state=None) -> actions, for evaluation
        (a `RecurrentPolicy` for an agent with memory).

        Args:
            agent: the bound agent (`make`'s).

        Returns:
            The policy: actions [B] (or [B, ...]) for observations [B, ...].
        """

    def placement_problem(self, config: Any, devices: int) -> Optional[str]:
        """One line naming a split of the envs over `devices` that the agent's update cannot
        take (refused before anything starts, like an indivisible num_envs), or None.

        Args:
            config: the agent's Config.
            devices: the number of devices the envs split over.

        Returns:
            The problem in one line, or None.
        """


@runtime_checkable
class HostAgentDef(AgentDef, Protocol):
    """An agent that also learns from envs in worker processes (the host loop)."""

    def host_fns(self, agent: Any) -> HostFns:
        """The same act and update, on rollouts that the host loop collects.

        Args:
            agent: the bound agent (`make`'s).

        Returns:
            The host loop's functions.
        """

    def host_config_problem(self, config: Any) -> Optional[str]:
        """One line naming what `config` asks that the host loop does not do (the run is
        refused with it before anything starts), or None.

        Args:
            config: the agent's Config.

        Returns:
            The problem in one line, or None.
        """


def host_takes_any_config(config: Any) -> Optional[str]:
    """`host_config_problem` of an agent whose every valid config runs in the host loop: None.

    Args:
        config: the agent's Config (ignored).

    Returns:
        Always None: every valid config runs in the host loop.
    """
    del config
    return None
