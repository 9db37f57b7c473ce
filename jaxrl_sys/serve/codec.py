"""Request and response bodies: JSON for people, msgpack (raw array bytes) for speed.

An array travels as a (nested) list, or as `{"dtype": ..., "shape": [...], "data": <bytes>}`
in msgpack. Anything malformed raises `RequestError` with an HTTP status and one line.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import msgspec
import numpy as np

JSON = "application/json"
MAX_NUMBER = 1e30  # a reward's largest magnitude: sums of many stay finite in float32
MSGPACK = "application/msgpack"


class RequestError(Exception):
    """A request the server refuses: its HTTP status (4xx) and one line saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def media_type(content_type: Optional[str]) -> str:
    """The body's format from its Content-Type header (JSON when none is given)."""
    kind = (content_type or JSON).split(";")[0].strip().lower()
    if kind in (JSON, ""):
        return JSON
    if kind in (MSGPACK, "application/x-msgpack"):
        return MSGPACK
    raise RequestError(415, f"unsupported content type {kind!r}: use {JSON} or {MSGPACK}")


def decode(body: bytes, kind: str) -> dict[str, Any]:
    """A request body as a dict; an empty body is {}."""
    if not body:
        return {}
    try:
        payload = msgspec.msgpack.decode(body) if kind == MSGPACK else msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise RequestError(400, f"body is not valid {kind.split('/')[1]}: {error}") from None
    if not isinstance(payload, dict):
        raise RequestError(400, f"body must be an object, got {type(payload).__name__}")
    return payload


def encode(payload: dict[str, Any], kind: str) -> bytes:
    """A response body in `kind` (arrays already packed with `pack_array`)."""
    return msgspec.msgpack.encode(payload) if kind == MSGPACK else msgspec.json.encode(payload)


def pack_array(array: np.ndarray, kind: str) -> Any:
    """`array` for a body: raw bytes with dtype and shape in msgpack, nested lists in JSON."""
    array = np.asarray(array)
    if kind == MSGPACK:
        return {"dtype": array.dtype.str, "shape": list(array.shape),
                "data": np.ascontiguousarray(array).tobytes()}
    return array.tolist()


def unpack_array(value: Any, name: str) -> np.ndarray:
    """A body's array field (either form `pack_array` writes) as numpy."""
    if isinstance(value, dict):
        try:
            dtype = np.dtype(value["dtype"])
            shape = tuple(int(d) for d in value["shape"])
            data = value["data"]
            if dtype.kind not in "biuf" or not isinstance(data, (bytes, bytearray)):
                raise ValueError(dtype)
            return np.frombuffer(data, dtype).reshape(shape)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise RequestError(422, f"{name}: a packed array needs a numeric dtype, a shape and "
                                    "bytes that fill it") from None
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise RequestError(422, f"{name}: not an array of numbers") from None
    if array.dtype.kind not in "biuf":
        raise RequestError(422, f"{name}: not an array of numbers")
    return array


def array_field(payload: dict[str, Any], name: str, shape: Sequence[int],
                dtype: Any) -> np.ndarray:
    """The field `name` as an array of exactly `shape`, finite, cast to `dtype`."""
    if name not in payload:
        raise RequestError(422, f"missing field {name!r}")
    array = unpack_array(payload[name], name)
    if array.shape != tuple(shape):
        raise RequestError(422, f"{name}: shape {list(array.shape)}, expected {list(shape)}")
    with np.errstate(over="ignore", invalid="ignore"):
        cast = array.astype(dtype, copy=False)
    if cast.dtype.kind == "f" and not np.isfinite(cast).all():
        raise RequestError(422, f"{name}: contains NaN or infinity (as {cast.dtype})")
    if cast.dtype.kind in "iu" and not np.array_equal(cast, array):
        raise RequestError(422, f"{name}: not whole numbers within {cast.dtype}'s range")
    return cast


def number_field(payload: dict[str, Any], name: str, default: Optional[float] = None) -> float:
    """The field `name` as a number of magnitude at most `MAX_NUMBER` (`default` when absent
    and one is given)."""
    if name not in payload:
        if default is None:
            raise RequestError(422, f"missing field {name!r}")
        return default
    value = payload[name]
    try:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(
            value, bool) else None
    except OverflowError:
        number = None
    if number is None or not abs(number) <= MAX_NUMBER:
        raise RequestError(422, f"{name}: expected a number of magnitude at most {MAX_NUMBER:g}")
    return number


def text_field(payload: dict[str, Any], name: str, required: bool = True) -> Optional[str]:
    """The field `name` as a non-empty string of at most 128 characters (None when absent and
    not `required`)."""
    if name not in payload:
        if required:
            raise RequestError(422, f"missing field {name!r}")
        return None
    value = payload[name]
    if not isinstance(value, str) or not 0 < len(value) <= 128:
        raise RequestError(422, f"{name}: expected a string of 1 to 128 characters")
    return value
