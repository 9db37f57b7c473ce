"""The README stays short and true to the package, and the docs site stays whole: the agent
tables and agent counts of the README and docs are the registry's, every docs page in
mkdocs.yml's nav, every README link into docs/ to a file that exists, the README's test command
the one CI runs, and `mkdocs build --strict`."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from jaxrl_sys.agents import names

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
# "Ten agents (PPO, DQN, ..., MuZero/AlphaZero, ...)": a count of the registry and its list
AGENT_COUNT = re.compile(rf"\b({'|'.join(NUMBER_WORDS)}|\d+) agents \(([^)]*)\)", re.I)
TEST_COMMAND = 'pip install -e ".[dev]" && python -m pytest'


def _section(markdown: str, heading: str) -> str:
    """The text under `## heading`, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", markdown, re.M | re.S)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def _table_first_cells(text: str) -> list[str]:
    """The first cell of every body row of the first markdown table in `text`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [row.split("|")[1].strip() for row in rows[2:]]


def _table_first_column(text: str) -> list[str]:
    """The names in the first cell of every body row of the first markdown table in `text`,
    unquoted (a cell may name several: "`mappo`, `ippo`")."""
    return [name.strip().strip("`") for cell in _table_first_cells(text)
            for name in cell.split(",")]


def _registry_names(listed: str) -> list[str]:
    """Registry names of agents as the prose writes them: "MAPPO, IPPO" -> mappo, ippo;
    "MuZero/AlphaZero" -> muzero (AlphaZero is a MuZero mode); parentheses ("PPO
    (`jaxrl_sys/agents/ppo/`)") are left out."""
    return [name.split("/")[0].strip().lower()
            for name in re.sub(r"\(.*?\)", "", listed).split(",")]


def _nav_pages(nav: list) -> list[str]:
    """Every page path in an mkdocs nav, nested sections included."""
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def _mkdocs_config() -> dict:
    """mkdocs.yml as data (it uses no YAML tags)."""
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


def test_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; the detail goes to docs/"


def test_the_readmes_agent_table_is_the_registry():
    """One row per registered agent (or per agent and its variant), none that is not one."""
    agents = _table_first_column(_section(README.read_text(encoding="utf-8"), "Agents"))
    assert sorted(agents) == sorted(names()), (
        f"README's agent table {sorted(agents)} is not jaxrl_sys.agents.names() {sorted(names())}")


def test_the_docs_agent_table_is_the_registry():
    """docs/agents-and-envs.md's first table: "PPO (`jaxrl_sys/agents/ppo/`)", "MAPPO, IPPO
    (...)"; its agents are the registry's."""
    cells = _table_first_cells((DOCS / "agents-and-envs.md").read_text(encoding="utf-8"))
    agents = [name for cell in cells for name in _registry_names(cell)]
    assert sorted(agents) == sorted(names()), (
        f"docs/agents-and-envs.md's agent table {sorted(agents)} is not "
        f"jaxrl_sys.agents.names() {sorted(names())}")


def test_the_agent_counts_of_the_readme_and_the_docs_home_are_the_registrys():
    """"N agents (A, B, ...)" in README.md and docs/index.md: N is the number of registered
    agents and the list names each of them once."""
    for page in (README, DOCS / "index.md"):
        found = AGENT_COUNT.findall(page.read_text(encoding="utf-8"))
        assert found, f"{page.name}: no 'N agents (A, B, ...)' sentence"
        for count, listed in found:
            number = int(count) if count.isdigit() else NUMBER_WORDS.index(count.lower())
            assert number == len(names()), (
                f"{page.name} says '{count} agents'; {len(names())} are registered")
            assert sorted(_registry_names(listed)) == sorted(names()), (
                f"{page.name} lists agents ({listed}), not the registry's {names()}")


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists():
    nav = _nav_pages(_mkdocs_config()["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(pages) - set(nav)) == [], "docs pages not in mkdocs.yml's nav"
    assert sorted(set(nav) - set(pages)) == [], "nav entries without a page"
    assert len(nav) == len(set(nav)), "a page twice in the nav"


def test_readme_links_into_docs_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == [], f"README links to files that do not exist: {missing}"


def test_readme_test_command_is_what_ci_runs():
    assert TEST_COMMAND in README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r'pip install --quiet -e "\.\[dev(,docs)?\]"', ci)
    assert "\npython -m pytest\n" in ci


def test_images_copied_into_docs_are_the_files_in_results():
    copies = [p for p in (DOCS / "assets").rglob("*.png") if (ROOT / "results" / p.name).exists()]
    assert copies
    for copy in copies:
        assert copy.read_bytes() == (ROOT / "results" / copy.name).read_bytes(), f"{copy} is stale"


def test_the_site_builds_with_every_warning_an_error(tmp_path):
    """Broken links and anchors, pages left out of the nav, an API reference module that is not
    there: `mkdocs build --strict` fails on each (mkdocs.yml's validation settings)."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "losses" / "index.html").is_file()


def test_every_script_is_named_in_the_readme_or_the_docs():
    """A user browsing scripts/ or benchmarks/ finds each one explained somewhere."""
    text = README.read_text(encoding="utf-8") + "".join(
        page.read_text(encoding="utf-8") for page in DOCS.rglob("*.md"))
    unnamed = [f"{folder}/{p.name}" for folder in ("scripts", "benchmarks")
               for p in sorted((ROOT / folder).glob("*.py"))
               if p.name != "timing.py" and f"{folder}/{p.name}" not in text]
    assert unnamed == []
