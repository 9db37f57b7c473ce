"""Test setup: 8 simulated CPU devices, set before JAX initialises its backends."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One compilation cache for the session, shared with the scripts the tests start (they
# compile the same programs many times): a fresh directory, never the user's cache.
os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxrl_sys_xla_cache_")
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
