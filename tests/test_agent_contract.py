"""The agent contract: every registered agent is what `agents.load` promises (the AgentDef
protocol, with signatures that match it), its promises name envs that exist, and agents without
self-play are refused two-player games before anything is created."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from jaxrl_sys import RunSpec, agents, envs
from jaxrl_sys.api import resolve
from jaxrl_sys.core.types import MEMORY, PLAYS, AgentDef, HostAgentDef, LearningPromise
from jaxrl_sys.runtime.cli import UsageError


def _protocol_members(protocol: type) -> dict[str, object]:
    """Names the protocol declares (attributes and methods), with their declarations."""
    members = {name: None for name in getattr(protocol, "__annotations__", {})}
    members.update({name: value for name, value in vars(protocol).items()
                    if callable(value) and not name.startswith("_")})
    return members


@pytest.mark.parametrize("name", agents.names())
def test_every_registered_agent_keeps_the_contract(name):
    agent = agents.load(name)
    config = agent.default_config(agent.DEFAULT_ENV)
    assert isinstance(agent, AgentDef)
    for member, declared in _protocol_members(AgentDef).items():
        value = getattr(agent, member)
        if declared is None:
            continue
        wanted = list(inspect.signature(declared).parameters)[1:]  # without `self`
        given = list(inspect.signature(value).parameters)
        assert given[:len(wanted)] == wanted, f"{name}.{member}{inspect.signature(value)}"
    assert isinstance(agent.DEFAULT_ENV, str)
    assert agent.PLAYS in PLAYS and agent.MEMORY in MEMORY
    assert (agent.MEMORY == "optional") == ("memory" in {f.name for f in dataclasses.fields(config)}
                                              and agent.MEMORY != "always")
    config.validate()


@pytest.mark.parametrize("name", agents.names())
def test_every_promise_names_an_env_of_the_registry(name):
    promises = agents.load(name).PROMISES
    assert promises and all(isinstance(p, LearningPromise) for p in promises)
    known = set(envs.names())
    for promise in promises:
        assert (promise.env in known or envs.is_host_env(promise.env)
                or envs.is_multi_agent(promise.env)), promise.env


def test_host_loop_agents_are_those_with_host_fns():
    with_host = {name for name in agents.names() if isinstance(agents.load(name), HostAgentDef)}
    assert {"ppo", "dqn", "sac"} <= with_host and "muzero" not in with_host


def test_the_loader_refuses_an_unknown_agent_in_one_line():
    with pytest.raises(agents.UnknownAgentError, match="unknown agent 'ppp'; closest: ppo"):
        agents.load("ppp")


@pytest.mark.parametrize("name", [n for n in agents.names() if agents.load(n).PLAYS == "single"])
@pytest.mark.parametrize("env_name", ["TicTacToe-v0", "pgx:connect_four"])
def test_agents_without_self_play_are_refused_two_player_games(name, env_name, tmp_path):
    spec = RunSpec(agent=name, env=env_name, run_root=str(tmp_path))
    with pytest.raises(UsageError, match=f"{env_name} is a two-player game.*--agent muzero"):
        resolve(spec)
    assert list(tmp_path.iterdir()) == []


def test_a_single_player_variant_of_a_board_game_is_not_refused():
    spec = RunSpec(agent="ppo", env="TicTacToe-v0", overrides=("env.opponent=random",))
    resolve(spec)
    resolve(RunSpec(agent="muzero", env="pgx:connect_four"))


def _named_in(message: str, kind: str) -> set[str]:
    """The agents a refusal lists after "(<kind>: ...)"."""
    listed = message.split(f"({kind}: ", 1)[1].split(")", 1)[0]
    return set(listed.split(", "))


def test_refusals_name_the_fitting_agents_from_the_registry():
    loaded = {name: agents.load(name) for name in agents.names()}
    with pytest.raises(UsageError) as team:
        resolve(RunSpec(agent="dqn", env="jaxmarl:MPE_simple_spread_v3"))
    assert _named_in(str(team.value), "multi-agent agents") == {
        n for n, a in loaded.items() if a.PLAYS == "team"}
    with pytest.raises(UsageError) as memory:
        resolve(RunSpec(agent="dqn", overrides=("memory=gru",)))
    assert _named_in(str(memory.value), "recurrent agents") == {
        n for n, a in loaded.items() if a.MEMORY != "none"}
    assert {"ppo", "r2d2", "mappo", "qmix"} <= _named_in(str(memory.value), "recurrent agents")


def test_players_are_known_without_building_the_env():
    assert envs.num_players("TicTacToe-v0") == 2
    assert envs.num_players("TicTacToe-v0", opponent="perfect") == 1
    assert envs.num_players("pgx:connect_four") == 2 and envs.num_players("CartPole-v1") == 1
    for name, params in [("TicTacToe-v0", {}), ("TicTacToe-v0", {"opponent": "random"})]:
        assert envs.make(name, **params).spec.num_players == envs.num_players(name, **params)
