"""Every agent has a default for every env family it can train (tuned entries, a family
default, or for the classic tasks its Config's own) and refuses the others in one line; the
docs page of that table is the one the registry generates."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxrl_sys import agents, envs
from jaxrl_sys.core.config import ConfigError
from jaxrl_sys.tools import family_defaults as fd

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rows() -> list[fd.Coverage]:
    return fd.table(agents.names(), agents.catalog, envs, envs.FAMILIES)


def test_every_agent_covers_every_family_it_trains(rows):
    missing = [f"{r.agent} on {r.family}: {r.detail}" for r in rows if r.status == "missing"]
    assert missing == []


def test_refusals_follow_what_each_agent_plays(rows):
    refused = {(r.agent, r.family) for r in rows if r.status == "refused"}
    for name in agents.names():
        plays = agents.load(name).PLAYS
        assert ((name, "JaxMARL") in refused) == (plays != "team"), name
        assert ((name, "pgx board games") in refused) == (plays != "self_play"), name
    assert ("dqn", "Brax") in refused and ("sac", "MinAtar") in refused
    assert ("ppo", "Brax") not in refused and ("sac", "Brax") not in refused


def test_every_agents_every_tuned_entry_is_a_valid_config():
    invalid = []
    for name in agents.names():
        module = agents.load(name)
        for entry in module.TUNED:
            try:
                module.default_config(entry.env).validate()
            except ConfigError as error:
                invalid.append(f"{name} on {entry.env}: {error}")
    assert invalid == []


def test_a_family_default_sizes_an_untuned_env_of_the_family():
    impala = agents.load("impala")
    assert impala.default_config("Asterix-MinAtar").total_steps == 10_000_000
    assert impala.default_config("CartPole-v1").total_steps == 150_000


def test_the_docs_page_is_the_generated_one(rows):
    page = (ROOT / fd.PAGE).read_text(encoding="utf-8")
    assert page == fd.format_page(rows, envs.FAMILIES), \
        "run: python scripts/benchmark.py --defaults-table"
