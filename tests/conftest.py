"""Test setup: 8 simulated CPU devices, set before JAX initialises its backends."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One compilation cache for the session, shared with the scripts the tests start (they
# compile the same programs many times): a fresh directory, never the user's cache.
os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxrl_sys_xla_cache_")
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
# --xla_cpu_multi_thread_eigen=false: XLA:CPU's multithreaded Eigen pool can deadlock on
# vmapped programs (block_until_ready never returns); see jaxrl_sys/devices.py.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=8 --xla_cpu_multi_thread_eigen=false"
).strip()

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
