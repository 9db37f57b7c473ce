"""Device set-up that must happen before JAX initialises its backends.

Importing JAX initialises no backend: the flags and the device count set here take effect at
the first computation (or `jax.devices()`), so this module imports JAX at the top like any other.
"""

from __future__ import annotations

import importlib.util
import os

import jax

from jaxrl_sys.runtime.execution import PlacementError

try:  # private: a JAX release may move it; then backends count as not started
    from jax._src import xla_bridge
except ImportError:
    xla_bridge = None

# XLA:CPU's multithreaded Eigen intra-op pool intermittently deadlocks on vmapped programs
# (seen here on jaxlib 0.10.2 about once in ten runs: block_until_ready never returns).
# Single-threaded Eigen avoids it; parallelism on CPU comes from virtual devices instead.
SAFE_CPU_FLAGS = "--xla_cpu_multi_thread_eigen=false"
# LLVM optimisation level 1 instead of 2: measured here, 20-30% less compile time for the
# agents' programs at equal run speed. Added only when JAX will run on its CPU backend.
FAST_COMPILE_FLAGS = "--xla_backend_optimization_level=1"
# accelerator plugins JAX loads, each with the device nodes it needs to find a device
_ACCELERATORS = {
    "jax_cuda12_plugin": ("/dev/nvidiactl",), "jax_cuda13_plugin": ("/dev/nvidiactl",),
    "jax_rocm_plugin": ("/dev/kfd",), "jax_rocm7_plugin": ("/dev/kfd",),
    "libtpu": ("/dev/accel0", "/dev/vfio"),
}


def named_platforms() -> str:
    """The platforms JAX is told to use (`jax_platforms`, JAX_PLATFORMS), "" if none."""
    return jax.config.jax_platforms or os.environ.get("JAX_PLATFORMS", "")


def cpu_backend_expected() -> bool:
    """Whether JAX will compute on its CPU backend, judged before its backends start (XLA reads
    XLA_FLAGS then, so a CPU-only flag is decided first): the first platform `jax_platforms`
    (JAX_PLATFORMS) names when set, as JAX does; else CPU unless an accelerator plugin is
    installed and a device of its kind is present (a plugin without a device JAX skips)."""
    platforms = named_platforms()
    if platforms:
        return platforms.split(",")[0].strip() == "cpu"
    return not any(importlib.util.find_spec(module) is not None
                   and any(os.path.exists(node) for node in nodes)
                   for module, nodes in _ACCELERATORS.items())


def set_safe_cpu_flags() -> None:
    """Add the CPU flags above to XLA_FLAGS; effective only before JAX initialises a backend."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        flags = f"{flags} {SAFE_CPU_FLAGS}"
    if "xla_backend_optimization_level" not in flags and cpu_backend_expected():
        flags = f"{flags} {FAST_COMPILE_FLAGS}"
    os.environ["XLA_FLAGS"] = flags.strip()


def enable_compile_cache() -> None:
    """Keep compiled programs on disk so that a later run of the same program skips XLA
    compilation (measured here: PPO's 10.7 s compile became 2.1 s on the second run).

    The directory is $JAX_COMPILATION_CACHE_DIR if set, else ~/.cache/jaxrl_sys/xla;
    JAXRL_COMPILE_CACHE=off turns it off. Loading a cached program gives the same program,
    so results do not change.
    """
    if os.environ.get("JAXRL_COMPILE_CACHE", "").lower() in ("off", "0", "false"):
        return
    directory = os.environ.get("JAX_COMPILATION_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "jaxrl_sys", "xla"
    )
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def request_devices(num_devices: int) -> None:
    """Ask for `num_devices` virtual CPU devices, used when no accelerator is present.

    Before the process's first JAX computation this sets how many CPU devices JAX makes; after
    it (the caller's own JAX work came first) the devices that exist are used, and a run that
    needs more is refused in one line (`PlacementError`). GPU/TPU backends are not affected:
    their mesh is built from the real devices, and asking for too many is an error there.
    """
    set_safe_cpu_flags()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if _backends_started():
        _check_started_devices(num_devices)
        return
    current = jax.config.jax_num_cpu_devices
    if current is None or current < num_devices:
        try:
            jax.config.update("jax_num_cpu_devices", num_devices)
        except RuntimeError:  # a backend started all the same (another thread's computation)
            _check_started_devices(num_devices)


def _backends_started() -> bool:
    """Whether JAX has initialised its backends: the device count can no longer change."""
    if xla_bridge is None:
        return False
    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if callable(started) else False


def _check_started_devices(num_devices: int) -> None:
    """One-line `PlacementError` unless the running backend has `num_devices` devices, saying
    how to get more: they are set before the process's first JAX computation."""
    devices = jax.devices()
    if len(devices) >= num_devices:
        return
    platform = devices[0].platform
    how = ("run before any JAX computation in this process, or set "
           f"XLA_FLAGS=--xla_force_host_platform_device_count={num_devices} before starting "
           f"Python, or call jax.config.update('jax_num_cpu_devices', {num_devices}) right "
           "after importing jax" if platform == "cpu" else
           f"this machine has {len(devices)} {platform.upper()} device(s)")
    raise PlacementError(
        f"devices={num_devices}, but JAX already started with {len(devices)} "
        f"{platform.upper()} device(s) (this process computed with JAX before the run): {how}")


def describe() -> str:
    """'8 x CPU (cpu)' style description of the devices JAX sees."""
    devices = jax.devices()
    return f"{len(devices)} x {devices[0].platform.upper()} ({devices[0].device_kind})"
