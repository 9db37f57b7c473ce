"""The wheel a user installs: one top-level package (jaxrl_sys) with its data files, and the
console entry points, which work from outside the repository."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jaxrl_sys.agents import AGENTS

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("jaxrl-train", "jaxrl-evaluate", "jaxrl-arena", "jaxrl-benchmark",
            "jaxrl-check-learning", "jaxrl-plot", "jaxrl-serve", "jaxrl-record")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out), str(ROOT)],
                   check=True, cwd=out)
    (path,) = out.glob("jaxrl_sys-*.whl")
    return path


def test_the_wheel_installs_one_top_level_package_with_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"jaxrl_sys"}
    assert "jaxrl_sys/tools/references.json" in names
    for package in ("core", "envs", "agents/ppo", "agents/muzero", "runtime", "tools", "commands",
                    "serve"):
        assert f"jaxrl_sys/{package}/__init__.py" in names, package


def test_the_wheel_declares_every_console_entry_point(wheel):
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = archive.read(entry_points).decode()
    for command in COMMANDS:
        assert f"{command} = jaxrl_sys.commands." in text, command


@pytest.mark.slow
def test_an_entry_point_runs_outside_the_repository(tmp_path):
    """`jaxrl-train` is installed (editable here) and its module imports nothing from the
    repository's folders: bad input from another directory is one line and exit code 2."""
    result = subprocess.run([sys.executable, "-c",
                             "import sys; from jaxrl_sys.commands.train import entry; "
                             "sys.argv = ['jaxrl-train', '--agent', 'nope']; entry()"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    known = ", ".join(AGENTS)
    assert result.stderr.strip().splitlines() == [f"error: unknown agent 'nope'; known: {known}"]
