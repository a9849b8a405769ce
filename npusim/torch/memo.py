"""Simulate each distinct convolution of the adapter once: profiles memoised, numerics replayed exactly.

A training loop or ``gradcheck`` calls the same operator on the same shapes again and again (every step
of a training run, every perturbed input of a gradcheck). A launch's profile depends on the operator, its
inputs' shapes and dtypes, its attributes, the NPU configuration, the sanitizer mode and the L2 state,
never on the values (no kernel of the library branches on data; the same idea as
:mod:`npusim.model.memo`). So the adapter simulates the first call of each :func:`key` and reuses its
launches (profiles) for every later call with that key, the timing exactly the simulated one. The
sanitizer's checks are about accesses (races, bounds, uninitialised reads), never about values, so a
reused call would find what the first one found: nothing (else the first call had raised; with
``sanitize="warn"`` its warnings are shown once, at the first call).

The values of a reused call are computed on the host by :func:`conv2d_img2col`, which repeats the
**arithmetic** of the three img2col launches (NCHW -> NC1HWC0 on the Cube, the convolution, NHWC -> NCHW)
step for step, so that the result is bit for bit the simulator's (``tests/torch/test_torch_memo.py``
compares them, inf, NaN and signed zeros included):

- the transforms are Mmads with an identity: ``out_i = x_i * 1 + sum over the rest of the Mmad's K of
  0 * x_p``, in float64, stored as the dtype: ``x_i`` itself, except that a zero comes out +0 and an
  inf or NaN among the *other* elements of the same Mmad makes it NaN (``0 * inf``);
- the convolution accumulates each L0C tile of the tiling (a band's positions x a Cout block) in fp32
  in the kernel's order: the bias first (an Mmad with ones), then one float64 matrix product per K step
  (its Cin blocks, then its ``k_tile`` columns of the im2col matrix in FRACTAL_Z order
  ``(c1, kh, kw, c0)``), of the same shape as the Mmad's (rows and columns padded to whole fractals, so
  the same BLAS call sums in the same order), each added to the accumulator with one rounding; a band
  of output rows that reads only padding gets no K step at all; then Fixpipe's ReLU and the cast.

Only the configurations the replay knows are memoised: variant ``img2col`` on a core with Fixpipe
(A2), fp16 or fp32, no dequantisation, outside a :func:`npusim.shared_l2` block. Anything else is
simulated every time.
"""

from __future__ import annotations


import numpy as np

from ..conv.geometry import ConvGeometry, work_items
from ..conv.host import fractal_z_weights
from ..conv.replay import to_nc1hwc0, to_nchw
from ..conv.transform import cube_transposes
from ..l2 import current_shared
from ..memo import BoundedCache, freeze
from ..numerics import RoundMode, cast
from ..ops.runtime import Executor, OpResult

_CACHE: BoundedCache[list] = BoundedCache(512)
"""Launches ``[(name, Profile), ...]`` by :func:`key`, for the whole Python session."""
stats = _CACHE.stats


def key(ex: Executor, sanitize: str) -> tuple | None:
    """The memo key of a prepared call, or None when its values cannot be replayed on the host."""
    ctx = ex.ctx
    if ex.op.name != "conv2d" or ex.tiling.block_dim == 0 or current_shared() is not None \
            or not ctx.config.has_fixpipe:
        return None
    x, w, bias, scale = (list(ex.inputs) + [None] * 4)[:4]
    a = ctx.attrs
    if scale is not None or a.get("variant") != "img2col" or x.dtype.name not in ("float16", "float32") \
            or not cube_transposes(x.dtype, ctx.config):
        return None
    shapes = tuple(None if t is None else (tuple(t.shape), t.dtype.name) for t in (x, w, bias))
    return ("conv2d", shapes, freeze(a), ctx.config.key, sanitize, "cold L2")


def lookup(k: tuple | None) -> list | None:
    return _CACHE.get(k)


def store(k: tuple | None, launches: list) -> None:
    _CACHE.put(k, list(launches))


def clear() -> None:
    """Forget every memoised launch (the next call of each shape is simulated again)."""
    _CACHE.clear()


def size() -> int:
    return len(_CACHE)


def replay(ex: Executor, launches: list) -> OpResult:
    """The result of the prepared conv2d call ``ex`` with the memoised ``launches``: values by
    :func:`conv2d_img2col`, written into the executor's output as the simulated call would."""
    x, w, bias = ex.inputs[:3]
    t = ex.tiling
    y = conv2d_img2col(x, w, bias, t.geometry, t.conv, relu=t.epilogue.relu)
    np.copyto(ex.outputs[0], y)
    main = next(p for n, p in launches if n == "conv2d")
    return OpResult(ex.outputs, main, t, ex.cache_hit, ex.tiling_s, list(launches))


# --- the arithmetic of the launches ----------------------------------------------------------------
def _im2col(x5: np.ndarray, g: ConvGeometry) -> np.ndarray:
    """(N * Ho * Wo, C1 * Kh * Kw * C0) float64, columns in FRACTAL_Z's K order, padding as zeros."""
    xp = np.zeros((g.n, g.c1, g.h + 2 * g.ph, g.w + 2 * g.pw, g.c0), np.float64)
    xp[:, :, g.ph:g.ph + g.h, g.pw:g.pw + g.w] = x5
    cols = np.empty((g.n, g.ho, g.wo, g.c1, g.kh, g.kw, g.c0), np.float64)
    for i in range(g.kh):
        for j in range(g.kw):
            r, s = i * g.dh, j * g.dw
            win = xp[:, :, r:r + (g.ho - 1) * g.sh + 1:g.sh, s:s + (g.wo - 1) * g.sw + 1:g.sw]
            cols[:, :, :, :, i, j] = win.transpose(0, 2, 3, 1, 4)
    return cols.reshape(g.n * g.ho * g.wo, g.k1 * g.c0)


def _k_steps(g: ConvGeometry, t) -> list[tuple[int, int]]:
    """``(first im2col column, columns)`` of each Mmad of a tile, in the kernel's order: per Cin block,
    its ``k_tile`` columns."""
    steps = []
    for ci0, cc in t.cin_blocks(g):
        k_base = (ci0 // g.c0) * g.kk * g.c0
        k_block = -(-cc // g.c0) * g.kk * g.c0
        steps += [(k_base + k0, min(t.k_tile, k_block - k0)) for k0 in range(0, k_block, t.k_tile)]
    return steps


def conv2d_img2col(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, g: ConvGeometry, t,
                   relu: bool) -> np.ndarray:
    """The NCHW output of the img2col conv2d operator for tiling ``t``, computed on the host with the
    simulator's arithmetic (module docstring): equal bit for bit to the three simulated launches."""
    with np.errstate(all="ignore"):   # inf and NaN are the hardware's answer, as in the simulated launch
        return _conv2d_img2col(x, w, bias, g, t, relu)


def _conv2d_img2col(x, w, bias, g: ConvGeometry, t, relu: bool) -> np.ndarray:
    dt = x.dtype
    cols = _im2col(to_nc1hwc0(np.ascontiguousarray(x, dtype=dt)), g)
    wz = fractal_z_weights(w, g).reshape(g.k1, g.n1, 16, g.c0)
    wmat = wz.transpose(0, 3, 1, 2).astype(np.float64).reshape(g.k1 * g.c0, g.n1 * 16)
    bias_row = np.zeros(g.n1 * 16, np.float32)
    if bias is not None:   # the bias Mmad: ones @ bias, a float64 sum from +0
        bias_row[:g.cout] = (np.asarray(bias, dt).astype(np.float64) + 0.0).astype(np.float32)
    steps = _k_steps(g, t)
    acc = np.zeros((g.n * g.ho * g.wo, g.n1 * 16), np.float32)
    # every L0C tile as the kernel computes it: the same matrices (rows and columns padded to whole
    # fractals) in the same order, so that each float64 product is the same BLAS call
    for n, ho0, rows in work_items(g, t.rows):
        top = ho0 * g.sh - g.ph
        real = min(g.h, top + g.in_rows(rows)) > max(0, top)   # else: a band of padding rows, no K work
        base = (n * g.ho + ho0) * g.wo
        positions = rows * g.wo
        for m0 in range(0, positions, t.m_tile):
            mt = min(t.m_tile, positions - m0)
            r0 = base + m0
            for co0, cb in t.cout_blocks(g):
                n16 = -(-cb // 16) * 16
                tile = np.broadcast_to(bias_row[co0:co0 + n16], (mt, n16)).copy()
                first = bias is None and real
                for k0, kt in (steps if real else ()):
                    a = np.zeros((-(-mt // 16) * 16, kt))
                    a[:mt] = cols[r0:r0 + mt, k0:k0 + kt]
                    dot = (a @ np.ascontiguousarray(wmat[k0:k0 + kt, co0:co0 + n16]))[:mt]
                    tile = dot.astype(np.float32) if first else (dot + tile).astype(np.float32)   # one rounding
                    first = False
                acc[r0:r0 + mt, co0:co0 + n16] = tile
    res = acc[:, :g.cout]
    if relu:   # Fixpipe's ReLU, before its cast (the same values)
        res = np.maximum(res, np.float32(0))
    y = cast(res, np.dtype(g.out_dtype), RoundMode.CAST_RINT) if res.dtype != np.dtype(g.out_dtype) else res
    return to_nchw(np.ascontiguousarray(y).reshape(g.n, g.ho, g.wo, g.cout))
