"""Device-axis collectives that become no-ops where the axis is not bound.

Agents average gradients and sum episode counts over the execution layer's device axis. The
same functions must also run under a user's plain `jit`/`vmap`, with no such axis: there a
mean or sum over one device is the value itself, its index 0 and the axis size 1.
"""

from __future__ import annotations

from typing import Optional

import jax

from jaxrl_sys.core.types import PyTree


def bound(axis_name: Optional[str]) -> Optional[str]:
    """`axis_name` if it is bound where this is traced (inside shard_map/vmap), else None.

    Args:
        axis_name: the device axis's name, or None.

    Returns:
        `axis_name`, or None where no axis of that name is bound.
    """
    if axis_name is None:
        return None
    try:
        jax.lax.axis_size(axis_name)
    except NameError:  # "unbound axis name": plain jit, or no mapping at all
        return None
    return axis_name


def pmean(tree: PyTree, axis_name: Optional[str]) -> PyTree:
    """Mean over the device axis (identity outside it).

    Args:
        tree: arrays of any shapes.
        axis_name: the device axis, or None.

    Returns:
        The mean over the devices: `tree`'s structure, shapes and dtypes.
    """
    axis = bound(axis_name)
    return tree if axis is None else jax.lax.pmean(tree, axis)


def psum(tree: PyTree, axis_name: Optional[str]) -> PyTree:
    """Sum over the device axis (identity outside it).

    Args:
        tree: arrays of any shapes.
        axis_name: the device axis, or None.

    Returns:
        The sum over the devices: `tree`'s structure, shapes and dtypes.
    """
    axis = bound(axis_name)
    return tree if axis is None else jax.lax.psum(tree, axis)


def pmax(tree: PyTree, axis_name: Optional[str]) -> PyTree:
    """Maximum over the device axis (identity outside it).

    Args:
        tree: arrays of any shapes.
        axis_name: the device axis, or None.

    Returns:
        The element-wise maximum over the devices: `tree`'s structure, shapes and dtypes.
    """
    axis = bound(axis_name)
    return tree if axis is None else jax.lax.pmax(tree, axis)


def axis_index(axis_name: Optional[str]) -> jax.Array | int:
    """This device's index on the axis (0 outside it).

    Args:
        axis_name: the device axis, or None.

    Returns:
        This device's index, an int32 scalar array, or the int 0 outside the axis.
    """
    axis = bound(axis_name)
    return 0 if axis is None else jax.lax.axis_index(axis)


def axis_size(axis_name: Optional[str]) -> int:
    """Devices on the axis (1 outside it).

    Args:
        axis_name: the device axis, or None.

    Returns:
        The number of devices on the axis, 1 outside it.
    """
    axis = bound(axis_name)
    return 1 if axis is None else jax.lax.axis_size(axis)
