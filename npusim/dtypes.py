"""Element types the simulator knows, by name, with their numpy dtypes.

bfloat16 comes from ``ml_dtypes``; every other type is a plain numpy dtype. Arithmetic on a type runs in
that type (numpy rounds each fp16/bf16 result to the element type), never silently in float64.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import DtypeError

float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)

_BY_NAME = {d.name: d for d in (float16, bfloat16, float32, int8, uint8, int16, int32)}
#: dtype -> name, without numpy's slow ``dtype.name`` property (hot paths use this)
NAMES = {d: n for n, d in _BY_NAME.items()}
SUPPORTED = tuple(_BY_NAME)

#: C0 = 32 B / element size: the inner dimension of a fractal (16 for fp16/bf16, 8 fp32, 32 int8) [S1].
BLOCK_BYTES = 32
FRACTAL_BYTES = 512


_RESOLVED: dict = {}


def as_dtype(dtype, what: str = "dtype") -> np.dtype:
    """Normalise a dtype-like (``"float16"``, ``np.float16``, ``ml_dtypes.bfloat16``) to a numpy dtype.
    ``what`` names the argument in the :class:`~npusim.errors.DtypeError` raised for any other type."""
    try:
        return _RESOLVED[dtype]
    except (KeyError, TypeError):
        pass
    try:
        d = np.dtype(dtype) if not isinstance(dtype, str) else _BY_NAME.get(dtype)
    except TypeError:
        d = None
    if d is None or d.name not in _BY_NAME:
        shown = d.name if d is not None else repr(dtype)
        names = ", ".join(SUPPORTED[:-1]) + " or " + SUPPORTED[-1]
        raise DtypeError(f"{what}: {shown} is not supported; use {names}",
                         hint=f"convert on the host, e.g. {what}.astype(np.float32)" if what.isidentifier()
                         and what != "dtype" else f"pass one of ns.{', ns.'.join(SUPPORTED)}",
                         dtype=shown, argument=what)
    try:
        _RESOLVED[dtype] = d
    except TypeError:
        pass
    return d


def name(dtype) -> str:
    return as_dtype(dtype).name


def itemsize(dtype) -> int:
    return as_dtype(dtype).itemsize


def c0(dtype) -> int:
    """Elements in one 32 B block: the C0 of NC1HWC0 and the K0 of a fractal."""
    return BLOCK_BYTES // itemsize(dtype)


def is_float(dtype) -> bool:
    return as_dtype(dtype).name in ("float16", "bfloat16", "float32")
