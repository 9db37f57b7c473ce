"""Test setup: 8 simulated CPU devices, set before JAX initialises its backends."""

import os
import shutil
import tempfile

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
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
# The CPU flags scripts/train.py uses (single-threaded Eigen, which avoids a deadlock on
# vmapped programs; LLVM -O1): tests compile the programs a user's command compiles, so a
# learning test walks the trajectories that scripts/check_learning.py measures.
from jaxrl_sys.runtime.devices import set_safe_cpu_flags  # noqa: E402  (imports no JAX)

set_safe_cpu_flags()

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)


def pytest_unconfigure(config):
    """The process that made the session's compilation cache removes it."""
    if _OWNS_CACHE:
        shutil.rmtree(os.environ[_SESSION_CACHE], ignore_errors=True)
