"""The layout transforms of the img2col convolution computed on the host, bit for bit as the device does.

The transforms are Mmads with an identity (:mod:`npusim.conv.transform`): ``out_i = x_i * 1 + sum over the
rest of the Mmad's K of 0 * x_p``, in float64, stored as the dtype: ``x_i`` itself, except that a zero
comes out +0 and an inf or NaN among the *other* elements of the same Mmad makes it NaN (``0 * inf``).
:func:`to_nc1hwc0` and :func:`to_nchw` repeat that arithmetic, so that a memoised launch
(:mod:`npusim.conv.launch_memo`, :mod:`npusim.torch.memo`) gives exactly the simulated values
(``tests/torch/test_torch_memo.py`` and ``tests/conv/test_launch_memo.py`` compare them).
"""

from __future__ import annotations

import numpy as np

from ..numerics import RoundMode, cast


def _identity_mmad(v: np.ndarray, axis: int) -> np.ndarray:
    """``I @ v`` along ``axis`` (the Mmad's K: the elements one output is summed over) in float64."""
    bad = ~np.isfinite(v)
    others_bad = (bad.sum(axis=axis, keepdims=True) - bad) > 0
    out = v.astype(np.float64) + 0.0                 # x * 1 + (+0): a zero comes out +0
    out[others_bad] = _DEFAULT_NAN                   # 0 * inf (or NaN) elsewhere in the sum
    return out


with np.errstate(invalid="ignore"):
    _DEFAULT_NAN = np.float64(0.0) * np.float64(np.inf)   # the NaN the arithmetic makes (its sign bit as on x86)


def _groups(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(size, n - s)) for s in range(0, n, size)]


def to_nc1hwc0(x: np.ndarray) -> np.ndarray:
    """NCHW -> NC1HWC0 (no padding) as :func:`npusim.conv.transform.to_nc1hwc0` computes it: each Mmad
    sums over a run of ``chunk`` positions of one channel plane (see the module docstring)."""
    n, c, h, w = x.shape
    dt = x.dtype
    c0 = 32 // dt.itemsize
    c1 = -(-c // c0)
    chunk = 128 if dt.itemsize == 2 else 64
    flat = x.reshape(n, c, h * w)
    acc = np.zeros((n, c1 * c0, h * w), np.float64)
    for p0, cnt in _groups(h * w, chunk):
        acc[:, :c, p0:p0 + cnt] = _identity_mmad(flat[:, :, p0:p0 + cnt], axis=2)
    out = cast(acc.astype(np.float32), dt, RoundMode.CAST_RINT)
    return np.ascontiguousarray(out.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2))


def to_nchw(y: np.ndarray) -> np.ndarray:
    """NHWC -> NCHW as :func:`npusim.conv.transform.to_nchw` computes it: each Mmad sums over a block of
    16 channels of one position."""
    n, h, w, c = y.shape
    flat = y.reshape(n, h * w, c)
    acc = np.empty((n, h * w, c), np.float64)
    for c_0, cnt in _groups(c, 16):
        acc[:, :, c_0:c_0 + cnt] = _identity_mmad(flat[:, :, c_0:c_0 + cnt], axis=2)
    out = cast(acc.astype(np.float32), y.dtype, RoundMode.CAST_RINT)
    return np.ascontiguousarray(out.reshape(n, h, w, c).transpose(0, 3, 1, 2))
