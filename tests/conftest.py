"""Test setup: 8 simulated CPU devices, set before JAX initialises its backends."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# --xla_cpu_multi_thread_eigen=false: XLA:CPU's multithreaded Eigen pool can deadlock on
# vmapped programs (block_until_ready never returns); see jaxrl_sys/devices.py.
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + " --xla_force_host_platform_device_count=8 --xla_cpu_multi_thread_eigen=false"
).strip()

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
