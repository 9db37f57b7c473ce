"""Loading a user's PureJaxRL checkout for the side-by-side benchmarks (bench_purejaxrl_rnn.py,
gpu.py): its files run unchanged with importlib, none of its code is copied here.

PureJaxRL was written for gymnax 0.0.x and flax < 0.7.1, so two names in a loaded module are
bound to adapters of ours: `gymnax` to one whose `make` hands back the gymnax 1.x env behind the
old 5-tuple step (done = terminated or truncated, which is what their `done` meant), and `nn` to
flax.linen with a `GRUCell` taking the old call forms. wrappers.py imports brax and navix at its
top for wrappers the PPO files do not use; empty stand-ins take their place while it loads.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

GET_PUREJAXRL = "git clone https://github.com/luchris429/purejaxrl"
PUREJAXRL_GRU_WIDTH = 128  # ppo_rnn.py's `ScannedRNN.initialize_carry(NUM_ENVS, 128)`
# wrappers.py imports these at its top for its Brax and navix wrappers, unused by ppo_rnn.py
STAND_INS = ("brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix")


class UsageError(Exception):
    """Bad input, reported as one line and exit status 2."""


def purejaxrl_folder(checkout: Path | None, filename: str = "ppo_rnn.py") -> Path:
    """The `purejaxrl/` folder holding `filename` and wrappers.py, given a checkout's root (or
    that folder itself)."""
    if checkout is None:
        raise UsageError(f"PureJaxRL's side needs --purejaxrl PATH, a checkout of it "
                         f"({GET_PUREJAXRL})")
    for folder in (checkout / "purejaxrl", checkout):
        if (folder / filename).is_file() and (folder / "wrappers.py").is_file():
            return folder
    raise UsageError(f"--purejaxrl {checkout}: no purejaxrl/{filename} and wrappers.py there "
                     f"(get a checkout with `{GET_PUREJAXRL}`)")


class FiveTupleStep:
    """A gymnax 1.x env seen through gymnax 0.0.x's step, the one PureJaxRL's wrappers unpack:
    (obs, state, reward, done, info), done = terminated or truncated."""

    def __init__(self, env: Any):
        self._env = env

    def __getattr__(self, name: str) -> Any:
        if name == "_env":  # not set yet (a copy being made): no recursion through it
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key: Any, state: Any, action: Any, params: Any = None) -> tuple:
        """gymnax 1.x's step (auto-reset included) with its two end flags folded into one."""
        import jax.numpy as jnp

        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action,
                                                                         params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


def gymnax_adapter() -> types.SimpleNamespace:
    """What ppo_rnn.py's global `gymnax` is used for (`gymnax.make`), giving FiveTupleStep envs."""
    import gymnax

    def make(name: str, **kwargs: Any) -> tuple[FiveTupleStep, Any]:
        env, params = gymnax.make(name, **kwargs)
        return FiveTupleStep(env), params

    return types.SimpleNamespace(make=make)


def flax_linen_adapter() -> types.ModuleType:
    """flax.linen with a `GRUCell` taking flax < 0.7.1's call forms: `GRUCell()` (the width as
    a default) and the static `GRUCell.initialize_carry(key, batch_dims, size)`."""
    import flax.linen as nn

    class GRUCell(nn.GRUCell):
        """flax's GRUCell, its width defaulting to ppo_rnn.py's 128."""

        features: int = PUREJAXRL_GRU_WIDTH

        @staticmethod
        def initialize_carry(key: Any, batch_dims: tuple[int, ...], size: int) -> Any:
            """The zero carry of a cell of width `size` for inputs of `batch_dims`."""
            return nn.GRUCell(features=size, parent=None).initialize_carry(
                key, (*batch_dims, size))

    linen = types.ModuleType("flax.linen")
    linen.__dict__.update({k: v for k, v in vars(nn).items() if not k.startswith("__")})
    linen.GRUCell = GRUCell
    return linen


def load_file(name: str, path: Path,
              needs: str = "PureJaxRL's PPO needs distrax, gymnax, flax, optax and chex",
              ) -> types.ModuleType:
    """The Python file at `path` executed as module `name`; a missing import is a UsageError
    that says what the file `needs`."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:
        raise UsageError(f"{path}: {e} ({needs})") from e
    return module


def load_purejaxrl(checkout: Path | None, filename: str = "ppo_rnn.py") -> types.ModuleType:
    """PureJaxRL's `filename` (ppo_rnn.py, ppo.py) as a module, loaded from the checkout (its
    `from wrappers import ...` finds the checkout's wrappers.py), its `gymnax` and `nn` bound to
    our adapters."""
    folder = purejaxrl_folder(checkout, filename)
    saved = {name: sys.modules.get(name) for name in (*STAND_INS, "wrappers")}
    try:
        for name in STAND_INS:
            sys.modules[name] = types.ModuleType(name)
        sys.modules["brax"].envs = sys.modules["brax.envs"]
        training = sys.modules["brax.envs.wrappers.training"]
        training.EpisodeWrapper = training.AutoResetWrapper = object
        wrappers = load_file("wrappers", folder / "wrappers.py")
        sys.modules["wrappers"] = wrappers  # ppo_rnn.py: `from wrappers import ...`
        loaded = load_file(f"purejaxrl_{Path(filename).stem}", folder / filename)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    loaded.gymnax = gymnax_adapter()
    loaded.nn = flax_linen_adapter()
    return loaded


