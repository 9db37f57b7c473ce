"""jaxrl-benchmark (scripts/benchmark.py) and jaxrl_sys/tools/benchmark.py: references,
planning, bad input, saved rows kept, the docs results page generated from the saved rows (and
the committed one up to date), and the quick classic suite learning CartPole."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from jaxrl_sys import agents
from jaxrl_sys import envs
from jaxrl_sys.commands import benchmark as benchmark_script
from jaxrl_sys.tools import benchmark as bm

ROOT = Path(__file__).resolve().parent.parent


def test_every_reference_names_its_source_and_every_suite_env_exists():
    references = bm.load_references()
    assert {"Breakout-MinAtar", "Acrobot-v1", "Catch-bsuite"} <= set(references)
    for ref in references.values():
        assert ref.source and math.isfinite(ref.value)
    for names in bm.SUITES.values():
        for name in names:
            envs.make(name)


def test_ratio_to_reference_is_one_at_the_reference_and_above_one_when_better():
    assert bm.ratio_to_reference(28.0, 28.0) == 1.0
    assert bm.ratio_to_reference(56.0, 28.0) == 2.0
    assert bm.ratio_to_reference(-160.0, -80.0) == 0.5  # negative returns: worse is below 1
    assert bm.ratio_to_reference(-40.0, -80.0) == 2.0
    assert math.isnan(bm.ratio_to_reference(5.0, -80.0))


def test_plan_leaves_out_pairs_the_agent_refuses_and_quick_caps_the_budget():
    entries, skipped = bm.plan("classic", ["dqn", "sac"], agents.load, envs, quick=True)
    pairs = {(e.agent, e.env) for e in entries}
    assert ("dqn", "CartPole-v1") in pairs and ("sac", "Pendulum-v1") in pairs
    assert ("dqn", "Pendulum-v1") not in pairs and ("sac", "CartPole-v1") not in pairs
    assert any(line.startswith("dqn on Pendulum-v1") for line in skipped)
    assert all(e.total_steps <= bm.QUICK_STEPS for e in entries)
    full, _ = bm.plan("minatar", ["ppo"], agents.load, envs)
    assert {e.total_steps for e in full} == {10_000_000}  # gymnax-blines' budget
    one, _ = bm.plan("minatar", ["ppo"], agents.load, envs, only_envs=["Freeway-MinAtar"])
    assert [(e.agent, e.env) for e in one] == [("ppo", "Freeway-MinAtar")]


def test_the_marl_suite_pairs_team_agents_with_team_envs_only():
    entries, skipped = bm.plan("marl", ["ppo", "mappo", "ippo"], agents.load, envs,
                               only_envs=["jaxmarl:MPE_simple_spread_v3"])
    assert [(e.agent, e.env) for e in entries] == [
        ("mappo", "jaxmarl:MPE_simple_spread_v3"), ("ippo", "jaxmarl:MPE_simple_spread_v3")]
    assert skipped == ["ppo on jaxmarl:MPE_simple_spread_v3: team agents learn team envs only"]
    _, skipped = bm.plan("classic", ["ppo", "mappo"], agents.load, envs,
                         only_envs=["CartPole-v1"])
    assert skipped == ["mappo on CartPole-v1: team agents learn team envs only"]


@pytest.mark.parametrize("argv, message", [
    (["--suite", "atari"], "unknown suite"),
    (["--agents", "a3c"], "unknown agent"),
    (["--agents", "sac", "--suite", "bsuite"], "no agent"),
    (["--seeds", "0"], "--seeds"),
    (["--report", "--suite", "bsuite"], "cannot read"),
    (["--suite", "classic", "--envs", "Breakout-MinAtar"], "not in suite"),
])
def test_bad_input_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert benchmark_script.main([*argv, "--out-dir", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def fake_row(agent: str, env: str, finals: list[float]) -> dict:
    curves = [[0.0] * len(finals), finals]
    return dict(agent=agent, env=env, total_steps=1000, seeds=list(range(len(finals))),
                env_steps=[500, 1000], eval_returns=curves, train_returns=curves, seconds=2.0,
                train_seconds=1.0, planned_steps=1000, config={"learning_rate": 1e-3})


def test_saved_rows_are_kept_not_rerun_and_rows_of_other_agents_stay(tmp_path):
    results = tmp_path / "bsuite.json"
    results.write_text(json.dumps({"rows": [fake_row("dqn", "Catch-bsuite", [0.5, 0.7]),
                                            fake_row("ppo", "Catch-bsuite", [1.0, 1.0])]}))
    entry = bm.Entry("ppo", "Catch-bsuite", 1000, {"learning_rate": 1e-3})

    def no_training(name):
        raise AssertionError("a saved row was trained again")

    rows = bm.run_suite([entry], no_training, envs, [0, 1], results)
    assert [(r.agent, r.env) for r in rows] == [("ppo", "Catch-bsuite"), ("dqn", "Catch-bsuite")]
    assert len(json.loads(results.read_text())["rows"]) == 2
    table = bm.format_table(rows, bm.load_references())
    assert "| Catch-bsuite | ppo | 1,000 | 1.0 ± 0.0 |" in table and "| 1.00 |" in table
    changed = bm.Entry("ppo", "Catch-bsuite", 1000, {"learning_rate": 3e-4})
    with pytest.raises(AssertionError, match="trained again"):  # other defaults: trained anew
        bm.run_suite([changed], no_training, envs, [0, 1], results)


def test_rows_another_process_saves_during_a_run_are_not_overwritten(tmp_path, monkeypatch):
    results = tmp_path / "minatar.json"
    results.write_text(json.dumps({"rows": [fake_row("ppo", "Asterix-MinAtar", [20.0, 30.0])]}))

    def run_while_another_process_saves(entry, module, registry, seeds, num_devices, on_chunk):
        rows = json.loads(results.read_text())["rows"]  # another suite finishes meanwhile
        rows.append(fake_row("dqn", "Freeway-MinAtar", [40.0, 50.0]))
        results.write_text(json.dumps({"rows": rows}))
        return bm._row_of(fake_row(entry.agent, entry.env, [25.0, 35.0]))

    monkeypatch.setattr(bm, "run_entry", run_while_another_process_saves)
    entry = bm.Entry("ppo", "Breakout-MinAtar", 1000, {"learning_rate": 5e-4})
    bm.run_suite([entry], lambda name: None, envs, [0, 1], results)
    saved = {(r["agent"], r["env"]) for r in json.loads(results.read_text())["rows"]}
    assert saved == {("ppo", "Asterix-MinAtar"), ("ppo", "Breakout-MinAtar"),
                     ("dqn", "Freeway-MinAtar")}


def test_page_writes_every_saved_suite_table_and_copies_its_curves(tmp_path, capsys):
    results, page = tmp_path / "results", tmp_path / "site" / "results.md"
    results.mkdir()
    rows = [{**fake_row("ppo", "CartPole-v1", [500.0, 480.0]), "measured": "2026-11-30, a CPU"},
            fake_row("dqn", "CartPole-v1", [400.0, 420.0])]
    (results / "classic.json").write_text(json.dumps({"rows": rows}))
    (results / "classic.png").write_bytes(b"curves of the classic suite")
    (results / "classic_quick.json").write_text(json.dumps({"rows": rows}))  # not a suite
    assert benchmark_script.main(["--page", str(page), "--out-dir", str(results)]) == 0
    text = page.read_text()
    assert "| CartPole-v1 | ppo | 1,000 | 490.0 ± 10.0 | 490.0 ± 10.0 | 500 | 0.98 | 2 | 2,000 " \
           "| 2026-11-30 |" in text
    assert "| CartPole-v1 | dqn | 1,000 | 410.0 ± 10.0 | 410.0 ± 10.0 | 500 | 0.82 | 2 | 2,000 " \
           "| – |" in text
    assert text.count("## ") == 1 and "## classic" in text  # no rows: no section
    assert "Measured 2026-11-30, a CPU." in text and "- CartPole-v1: 500 (ppo, " in text
    assert "](assets/results/classic.png)" in text
    assert (page.parent / "assets" / "results" / "classic.png").read_bytes() == \
        b"curves of the classic suite"
    assert capsys.readouterr().err == f"wrote {page}\n"


def test_page_without_saved_suites_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    page = tmp_path / "site" / "results.md"
    assert benchmark_script.main(["--page", str(page), "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no saved suite" in err and err.count("\n") == 1
    assert not page.parent.exists()


def test_committed_results_page_is_what_the_command_generates_from_results():
    """docs/results.md cannot go stale: after a benchmark run, `python scripts/benchmark.py
    --page` must be run again (and its output committed)."""
    text, images = bm.results_page(ROOT / "results")
    assert (ROOT / bm.RESULTS_PAGE).read_text(encoding="utf-8") == text, \
        "docs/results.md is stale: run `python scripts/benchmark.py --page`"
    assert {image.name for image in images} == {"classic.png", "minatar.png", "bsuite.png"}
    for image in images:
        copy = ROOT / bm.RESULTS_PAGE.parent / bm.PAGE_IMAGES / image.name
        assert copy.read_bytes() == image.read_bytes(), f"{copy} is stale"


@pytest.mark.slow
@pytest.mark.learning
def test_quick_classic_suite_writes_its_report_and_learns_cartpole(tmp_path, capsys):
    """One env of the suite (`--envs`): the report's path is the same for one row as for
    seven, and SAC, which refuses CartPole, is left out with a line. The learning of the
    suite's other pairs at their full budgets is tests/test_learning.py's (ppo:Pendulum-v1,
    sac:Pendulum-v1, ...), at stricter thresholds."""
    code = benchmark_script.main(["--suite", "classic", "--quick", "--seeds", "2",
                                  "--agents", "ppo,sac", "--envs", "CartPole-v1",
                                  "--out-dir", str(tmp_path), "--no-progress"])
    assert code == 0
    out, err = capsys.readouterr()
    assert "left out: sac on CartPole-v1" in err
    for suffix in ("json", "md", "png"):
        assert (tmp_path / f"classic_quick.{suffix}").is_file()
    rows = {(r.agent, r.env): r for r in bm.load_rows(tmp_path / "classic_quick.json")}
    assert list(rows) == [("ppo", "CartPole-v1")]
    assert "| CartPole-v1 | ppo |" in (tmp_path / "classic_quick.md").read_text() and \
        "| CartPole-v1 | ppo |" in out
    cartpole = rows["ppo", "CartPole-v1"].final
    print(f"quick suite: ppo CartPole {cartpole}")
    assert np.mean(cartpole) >= 300  # a random policy: ~22


def test_the_default_agents_are_the_registry(capsys):
    """`--agents` defaults to every registered agent, and its help lists them."""
    parser = benchmark_script.build_parser()
    assert parser.parse_args([]).agents == "all"
    assert all(name in parser.format_help() for name in agents.names())
