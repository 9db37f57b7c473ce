"""runtime/devices.py: XLA's CPU-only compile flag goes on only when JAX will run on its CPU
backend, judged as JAX judges it (issue 51: nothing CPU-only leaks onto a GPU)."""

from __future__ import annotations

import importlib.util

import pytest

from jaxrl_sys.runtime import devices


@pytest.fixture
def no_platforms(monkeypatch):
    """JAX left to choose its platform (the tests pin JAX_PLATFORMS=cpu)."""
    monkeypatch.setattr(devices, "named_platforms", lambda: "")


@pytest.mark.parametrize("platforms, cpu", [("cpu", True), ("cuda", False), ("cuda,cpu", False),
                                             ("tpu", False)])
def test_the_first_named_platform_decides(monkeypatch, platforms, cpu):
    monkeypatch.setattr(devices, "named_platforms", lambda: platforms)
    assert devices.cpu_backend_expected() is cpu


@pytest.mark.parametrize("plugin, device, cpu", [
    (None, False, True),  # no accelerator plugin: the CPU
    ("jax_cuda13_plugin", True, False),  # a CUDA plugin and a GPU: the GPU
    ("jax_cuda13_plugin", False, True),  # a CUDA plugin on a machine without one: the CPU
])
def test_a_plugin_counts_only_with_its_device(monkeypatch, no_platforms, plugin, device, cpu):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(devices.importlib.util, "find_spec",
                        lambda name: object() if name == plugin else
                        (None if name in devices._ACCELERATORS else real_find_spec(name)))
    monkeypatch.setattr(devices.os.path, "exists", lambda path: device)
    assert devices.cpu_backend_expected() is cpu


def test_the_fast_compile_flag_stays_off_a_gpu(monkeypatch):
    monkeypatch.setattr(devices, "named_platforms", lambda: "cuda")
    monkeypatch.setenv("XLA_FLAGS", "")
    devices.set_safe_cpu_flags()
    assert "xla_backend_optimization_level" not in devices.os.environ["XLA_FLAGS"]
    monkeypatch.setattr(devices, "named_platforms", lambda: "cpu")
    monkeypatch.setenv("XLA_FLAGS", "")
    devices.set_safe_cpu_flags()
    assert devices.FAST_COMPILE_FLAGS in devices.os.environ["XLA_FLAGS"]
