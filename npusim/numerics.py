"""Bit-level arithmetic of the units: casts with rounding modes, reductions, and the Cube's accumulation.

The model (documented in ``docs/cost-model.md``, "Numerics"):

- Element-wise vector math runs in the element type: numpy rounds each fp16/bf16 result to that type.
  For +, -, *, / and sqrt this is the correctly rounded IEEE result, as on hardware.
- Reductions are a pairwise tree in the element type (the hardware's tree order is not public).
- Mmad: products are exact. Into an fp32 accumulator, the exact sum of one Mmad's products is added and
  rounded once (the Cube rounds after every 16x16xK0 step; the difference is below 1e-6 relative and far
  below the 0.1 % accuracy bar). Into an fp16 accumulator (910, or the teaching option), every K0 block
  (16 elements along K) is summed exactly, rounded to fp16 and added with fp16 rounding: the error grows
  with K, which is the effect the FP16 lab shows. int8 x int8 accumulates exactly in int32 (wrapping).
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from .dtypes import int32


class RoundMode(Enum):
    """Rounding of Cast [S2]: RINT = to nearest, ties to even; ROUND = ties away from zero; ODD = to odd."""

    CAST_NONE = "none"
    CAST_RINT = "rint"
    CAST_FLOOR = "floor"
    CAST_CEIL = "ceil"
    CAST_ROUND = "round"
    CAST_TRUNC = "trunc"
    CAST_ODD = "odd"


def cast(x: np.ndarray, dtype: np.dtype, mode: RoundMode = RoundMode.CAST_RINT) -> np.ndarray:
    """Convert ``x`` to ``dtype`` with the hardware rounding ``mode``.

    Float -> int saturates to the integer range (NaN -> 0). CAST_NONE means RINT for a narrowing float cast
    and truncation for float -> int, the defaults of the instruction.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        if x.dtype.kind in "iu":
            return x.astype(dtype)  # integer narrowing wraps, like the hardware's plain conversion
        xf = x.astype(np.float64)
        if mode in (RoundMode.CAST_RINT,):
            r = np.rint(xf)
        elif mode == RoundMode.CAST_FLOOR:
            r = np.floor(xf)
        elif mode == RoundMode.CAST_CEIL:
            r = np.ceil(xf)
        elif mode == RoundMode.CAST_ROUND:
            r = np.sign(xf) * np.floor(np.abs(xf) + 0.5)
        else:  # TRUNC, NONE, ODD
            r = np.trunc(xf)
        info = np.iinfo(dtype)
        r = np.nan_to_num(r, nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(r, info.min, info.max).astype(dtype)
    nearest = x.astype(dtype)  # numpy rounds to nearest, ties to even
    if mode in (RoundMode.CAST_NONE, RoundMode.CAST_RINT) or x.dtype == dtype:
        return nearest
    if x.dtype.kind in "fV" and x.dtype.itemsize < dtype.itemsize:
        return nearest  # widening float casts (fp16/bf16 -> fp32) are exact
    ref = x.astype(np.float64)
    back = nearest.astype(np.float64)
    up = np.array(np.inf, dtype=dtype)
    down = np.array(-np.inf, dtype=dtype)
    finite = np.isfinite(ref)
    if mode == RoundMode.CAST_FLOOR:
        fix = finite & (back > ref)
        return np.where(fix, np.nextafter(nearest, down), nearest)
    if mode == RoundMode.CAST_CEIL:
        fix = finite & (back < ref)
        return np.where(fix, np.nextafter(nearest, up), nearest)
    if mode == RoundMode.CAST_TRUNC:
        fix = finite & (np.abs(back) > np.abs(ref))
        toward0 = np.where(ref > 0, np.nextafter(nearest, down), np.nextafter(nearest, up))
        return np.where(fix, toward0, nearest)
    lo = np.where(back > ref, np.nextafter(nearest, down), nearest)
    hi = np.where(back < ref, np.nextafter(nearest, up), nearest)
    if mode == RoundMode.CAST_ROUND:
        lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
        tie = finite & (lo64 != hi64) & (ref - lo64 == hi64 - ref)
        away = np.where(ref > 0, hi, lo)
        return np.where(tie, away, nearest)
    if mode == RoundMode.CAST_ODD:
        exact = back == ref
        bits_lo = lo.view(np.uint16 if dtype.itemsize == 2 else np.uint32)
        odd = np.where(bits_lo & 1, lo, hi)
        return np.where(exact | ~finite, nearest, odd)
    raise ValueError(f"unknown round mode {mode}")


def tree_sum(x: np.ndarray) -> np.ndarray:
    """Pairwise sum in the element type: halves are added until one element is left. Returns shape ()."""
    a = x
    while a.size > 1:
        h = a.size // 2
        s = a[:h] + a[h:2 * h]
        a = np.concatenate([s, a[2 * h:]]) if a.size % 2 else s
    return a.reshape(()) if a.size else np.zeros((), x.dtype)


def logical_a(a_zz: np.ndarray) -> np.ndarray:
    """The float64 (M, K') matrix of ZZ fractals (M1, K1, 16, K0), converted while being rearranged
    (exact for every input type, and int8 sums stay exact below 2**53; numpy's own fp16 cast beats a
    64 K-entry table, whose 512 KB fall out of the cache between Mmads)."""
    m1, k1, _, k0 = a_zz.shape
    return a_zz.transpose(0, 2, 1, 3).astype(np.float64, order="C").reshape(m1 * 16, k1 * k0)


def logical_b(b_zn: np.ndarray) -> np.ndarray:
    """The float64 (K', N) matrix of ZN fractals (K1, N1, 16, K0), like :func:`logical_a`."""
    k1, n1, _, k0 = b_zn.shape
    return b_zn.transpose(0, 3, 1, 2).astype(np.float64, order="C").reshape(k1 * k0, n1 * 16)


def mmad(c_nz: np.ndarray, a_zz: np.ndarray, b_zn: np.ndarray, k: int, accumulate: bool,
         a: np.ndarray | None = None, b: np.ndarray | None = None) -> None:
    """The Cube on whole fractals, in place: ``C [+]= A @ B`` with A as ZZ (M1, K1, 16, K0), B as ZN
    (K1, N1, 16, K0) and C as NZ (N1, M1, 16, 16), accumulation as in the module doc. ``a``, ``b``: their
    :func:`logical_a` / :func:`logical_b` when the caller has them already (left unchanged).

    Only the first ``k`` elements along K count (the K0 tail of the last fractal is ignored); all output
    fractals are written, padding rows and columns included, as the hardware computes whole fractals.
    """
    m1, k1, _, k0 = a_zz.shape
    n1 = b_zn.shape[1]
    acc_t = c_nz.dtype
    A = logical_a(a_zz) if a is None else a
    B = logical_b(b_zn) if b is None else b
    if k < k1 * k0:
        A = A.copy()
        B = B.copy()
        A[:, k:] = 0
        B[k:, :] = 0
    with np.errstate(all="ignore"):  # padding may hold garbage; it stays in padding
        if acc_t == np.float32:
            # exact for fp16/bf16 inputs; rounded once into the fp32 accumulator: the float64 sum with the
            # old value, cast to fp32 as it is stored, in L0C's NZ order (no transposed copies of C)
            nz = (A @ B).reshape(m1, 16, n1, 16).transpose(2, 0, 1, 3)
            if accumulate:
                np.add(nz, c_nz, out=c_nz, casting="unsafe")
            else:
                c_nz[...] = nz
            return
        old = c_nz.transpose(1, 2, 0, 3).reshape(m1 * 16, n1 * 16) if accumulate else None
        if acc_t == int32:
            out = (A @ B).astype(np.int64)
            if accumulate:
                out += old
            out = out.astype(np.int32)  # wraps modulo 2**32 like the int32 accumulator
        else:  # fp16 accumulator: rounded after every K0 block, which is where its error grows
            parts = np.matmul(A.reshape(-1, k1, k0).transpose(1, 0, 2),
                              B.reshape(k1, k0, -1)).astype(acc_t)
            out = old + parts[0] if accumulate else parts[0].copy()
            for j in range(1, k1):
                out += parts[j]
    c_nz[...] = out.reshape(m1, 16, n1, 16).transpose(2, 0, 1, 3)


ACC_TYPES = {  # (input dtype name, accumulator dtype name) pairs the Cube supports
    ("float16", "float32"), ("bfloat16", "float32"), ("float32", "float32"), ("int8", "int32"),
    ("float16", "float16"),
}
