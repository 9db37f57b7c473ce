"""Test setup: 8 simulated CPU devices (one in a child process) and the code generation each kind
of test compiles with, set before JAX initialises its backends.

Most tests check properties that hold whatever code XLA generates (8 devices equal one, a
resumed run equals an uninterrupted one, a loss on hand-made numbers), and compiling is most of
their cost. They compile with `TEST_CODEGEN_FLAGS`, which compile 2-3x faster and run slower.
A learning test (marked `learning`) asserts a return that was measured on the code a user's
command compiles, and a `user_codegen` test a property of that code (two forms of a program
giving the same bits) or costs more running than compiling, so each runs in a child pytest
process with the user's flags: the CPU flags `scripts/train.py` sets, plus anything the
caller put in XLA_FLAGS (`.ci/run`'s `--xla_cpu_max_isa=AVX`).
"""

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One compilation cache for the session, shared by the pytest-xdist workers (they inherit the
# controller's environment) and the scripts the tests start, since they compile the same
# programs many times: a fresh directory, never the user's cache, removed when the session ends.
_SESSION_CACHE = "JAXRL_SYS_TEST_XLA_CACHE"
_OWNS_CACHE = _SESSION_CACHE not in os.environ
if _OWNS_CACHE:
    os.environ[_SESSION_CACHE] = tempfile.mkdtemp(prefix="jaxrl_sys_xla_cache_")
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ[_SESSION_CACHE]
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
# The offline learning promises' recorded datasets, under the session's cache: made once by
# whichever test first needs one (cql, iql, marwil and bc share CartPole's) and then read.
DATASETS_ROOT = Path(os.environ[_SESSION_CACHE]) / "datasets"

# The caller's XLA_FLAGS, kept for the learning tests' child processes: the first process of
# the session (the xdist controller) records them before adding the tests' own.
_CALLER_FLAGS = "JAXRL_SYS_TEST_CALLER_XLA_FLAGS"
os.environ.setdefault(_CALLER_FLAGS, os.environ.get("XLA_FLAGS", ""))
# set in a learning test's child process: compile with the user's code generation
_USER_CODEGEN = "JAXRL_SYS_TEST_USER_CODEGEN"
IN_USER_CODEGEN = os.environ.get(_USER_CODEGEN) == "1"
# XLA's CPU fusion emitters off and LLVM -O0: measured on tests/test_execution.py, 91 s where
# the user's flags take 226 s (results/suite_durations.md); the programs run 20-30% slower.
TEST_CODEGEN_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"

_flags = os.environ[_CALLER_FLAGS]
if not IN_USER_CODEGEN:
    _flags = f"{_flags} {TEST_CODEGEN_FLAGS}"
# A child runs one test, placed on one device (as scripts/check_learning.py places a case), so
# it makes one CPU device: XLA:CPU sizes its thread pool by the device count, and 8 threads
# sharing a core trained Rainbow's learning case 1.7x slower than one (results/suite_durations.md).
TEST_DEVICES = 1 if IN_USER_CODEGEN else 8
os.environ["XLA_FLAGS"] = (
    f"{_flags} --xla_force_host_platform_device_count={TEST_DEVICES}".strip())
# The CPU flags scripts/train.py uses (single-threaded Eigen, which avoids a deadlock on
# vmapped programs; LLVM -O1 unless the flags above set a level), so that a learning test
# walks the trajectories that scripts/check_learning.py measures.
from jaxrl_sys.runtime.devices import set_safe_cpu_flags  # noqa: E402  (imports no JAX)

set_safe_cpu_flags()

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", TEST_DEVICES)


CHILD_MARKS = ("learning", "user_codegen")  # tests that run in a child process
# seconds per test id from the last whole-suite run (benchmarks/suite_durations.py): only the
# order the long child-process tests start in
DURATIONS = Path(__file__).with_name("durations.json")


def runs_in_child(item) -> bool:
    """Whether a test runs in a child pytest process with the user's code generation."""
    return any(item.get_closest_marker(name) for name in CHILD_MARKS)


def pytest_collection_modifyitems(config, items):
    """The child-process tests first, the longest first (by `DURATIONS`), so that no xdist
    worker is left running a long one alone at the end of a pass (CI's learning pass is
    nothing else); the rest keep their order, each module's tests together, so module
    fixtures are made once."""
    seconds = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.exists() else {}
    first = sorted((item for item in items if runs_in_child(item)),
                   key=lambda item: -seconds.get(item.nodeid, 0.0))
    items[:] = first + [item for item in items if not runs_in_child(item)]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run a learning or user_codegen test in a child pytest process with the user's code
    generation."""
    if IN_USER_CODEGEN or not runs_in_child(pyfuncitem):
        return None
    # the child runs one test: no third-party plugin is loaded (xdist, benchmark, hypothesis
    # and the like cost about a second of start-up each time) and the ini's addopts (xdist's
    # flags) are cleared
    env = dict(os.environ, XLA_FLAGS=os.environ[_CALLER_FLAGS], PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               **{_USER_CODEGEN: "1"})
    command = [sys.executable, "-m", "pytest", pyfuncitem.nodeid, "-o", "addopts=", "-q", "-s",
               "-p", "no:cacheprovider", "--no-header"]
    child = subprocess.run(command, cwd=pyfuncitem.config.rootpath, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(child.stdout)
    if child.returncode != 0:
        pytest.fail(f"{pyfuncitem.nodeid} failed under the user's code generation "
                    f"(exit {child.returncode}):\n{child.stdout[-6000:]}", pytrace=False)
    return True


@pytest.fixture(autouse=True, scope="module")
def _compiled_programs_released_after_each_module():
    """Drop JAX's compiled programs when a module's tests end. Each keeps its code mapped in
    memory (about 300 maps per test here), and an xdist worker runs hundreds of tests: past
    Linux's `vm.max_map_count` (65,530) XLA's allocations fail and the worker dies with a
    segmentation fault (stop 70's CI and two clean-clone runs, 80% of the way through, each in
    a compilation-cache read or write). Programs a later module needs again come back from
    the session's compilation cache."""
    yield
    jax.clear_caches()
    gc.collect()


def pytest_unconfigure(config):
    """The process that made the session's compilation cache removes it."""
    if _OWNS_CACHE:
        shutil.rmtree(os.environ[_SESSION_CACHE], ignore_errors=True)
