"""Kernels of lab 05 (FP16 precision): a matmul whose L0C accumulator type you choose, a Conv2D layer
built on it (im2col on the host), and two small vector kernels.

Why not ``npusim.conv``: it always accumulates in fp32, as the A2 Cube does. To *see* what fp16
accumulation costs, :func:`run_gemm` runs :func:`npusim.kernels.matmul.matmul` on packed weights with ``acc_dtype``:

- ``"float32"``: fp16 (or fp32) operands, fp32 L0C, Fixpipe casts to the output dtype: A2's real path;
- ``"float16"``: fp16 operands into an fp16 L0C (910/310P; on A2 only with the teaching option
  ``ns.a2.replace(name="a2-fp16acc", cube_fp16_accumulate=True)``). The model rounds every 16-element
  K0 block to fp16 and adds the blocks with fp16 rounding (``npusim.numerics.mmad``).

The weights (B) come packed as ZN fractals from the host (weights are constants, converted once, as a
framework does), so B needs no transpose on the way to L0B and fp32 works as well as fp16.

:func:`conv_layer` turns a (3x3, padded) convolution into that matmul with ``npusim.formats.im2col`` on
the HOST: the im2col matrix is Kh*Kw times the input, built and uploaded outside the simulator (lab 04
builds it on chip with ``load_data_3d``). It is a numerics harness, not a fast convolution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import npusim as ns
from npusim import formats

from .common import copy
from .matmul import MatmulTiling, matmul

FP16_ACC = ns.a2.replace(name="a2-fp16acc", cube_fp16_accumulate=True)
"""The A2 preset with the teaching option that lets Mmad accumulate fp16 into an fp16 L0C."""


def _up(v: int, m: int) -> int:
    return -(-v // m) * m


def default_tiling(m: int, n: int, k: int, dtype) -> MatmulTiling:
    """Tiles that fit every buffer twice: A and B tiles <= 32 KB each (L0A/L0B hold 64 KB), the fp32
    accumulator <= 64 KB (L0C 128 KB)."""
    isz = np.dtype(dtype).itemsize
    k0 = 32 // isz
    bm = min(128, _up(m, 16))
    bn = min(128, _up(n, 16))
    bk = max(k0, min(_up(k, k0), (32 * 1024 // (max(bm, bn) * isz)) // k0 * k0))
    return MatmulTiling(bm, bn, bk, 2)


def run_gemm(a: np.ndarray, b: np.ndarray, *, acc_dtype: str = "float32", out_dtype=None, relu: bool = False,
             tiling: MatmulTiling | None = None, config=None, block_dim: int = 1,
             sanitize: str = "error") -> ns.LaunchResult:
    """Launch :func:`npusim.kernels.matmul.matmul` on ``a @ b`` (``b`` packed to ZN here, on the host)
    with an L0C accumulator of ``acc_dtype``; ``result["c"]``.

    ``out_dtype`` defaults to ``a``'s dtype. ``config`` defaults to A2, or to :data:`FP16_ACC` when
    ``acc_dtype`` is float16 (A2 itself refuses an fp16 accumulator, as the hardware does)."""
    a = np.ascontiguousarray(a)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ns.UsageError(f"inner sizes differ: a is {a.shape}, b is {b.shape}")
    if b.dtype != a.dtype:
        raise ns.UsageError(f"a is {a.dtype} but b is {b.dtype}: the Cube multiplies equal types")
    if config is None:
        config = FP16_ACC if np.dtype(acc_dtype) == np.float16 else ns.a2
    out = np.zeros((m, n), dtype=out_dtype or a.dtype)
    t = tiling or default_tiling(m, n, k, a.dtype)
    b_zn = formats.nd_to_zn(b).reshape(-1)
    return ns.launch(matmul, block_dim, a, b_zn, out, m, n, k, t, b_packed=True,
                     acc_dtype=np.dtype(acc_dtype).name, relu=relu, config=config, sanitize=sanitize)


@dataclass
class LayerResult:
    """What :func:`conv_layer` returns: the NCHW output and the matmul's profile."""

    output: np.ndarray
    profile: ns.Profile

    def __getitem__(self, name: str) -> np.ndarray:
        if name != "y":
            raise KeyError(name)
        return self.output


def conv_layer(x: np.ndarray, w: np.ndarray, *, padding: int = 1, stride: int = 1, acc_dtype: str = "float32",
               out_dtype=None, relu: bool = False, config=None, tiling: MatmulTiling | None = None,
               sanitize: str = "error") -> LayerResult:
    """One Conv2D (NCHW ``x``, (Cout, Cin, Kh, Kw) ``w``, same dtype) as host im2col + :func:`run_gemm`."""
    x = np.asarray(x)
    w = np.asarray(w)
    n, cin, h, wd = x.shape
    cout, cin_w, kh, kw = w.shape
    if cin != cin_w:
        raise ns.UsageError(f"conv_layer: the input has {cin} channels but the weights expect {cin_w}")
    cols = [formats.im2col(x[i], kh, kw, (stride, stride), (padding, padding)) for i in range(n)]
    ho = (h + 2 * padding - kh) // stride + 1
    wo = (wd + 2 * padding - kw) // stride + 1
    a = np.concatenate(cols).astype(x.dtype)                      # (N*Ho*Wo, Cin*Kh*Kw), columns (c, i, j)
    b = np.ascontiguousarray(w.reshape(cout, cin * kh * kw).T)    # (Cin*Kh*Kw, Cout)
    res = run_gemm(a, b, acc_dtype=acc_dtype, out_dtype=out_dtype, relu=relu, tiling=tiling, config=config,
                   sanitize=sanitize)
    y = res["c"].reshape(n, ho, wo, cout).transpose(0, 3, 1, 2).copy()
    return LayerResult(y, res.profile)


def conv_reference(x, w, padding: int = 1, stride: int = 1, relu: bool = False) -> np.ndarray:
    """The exact float64 result of the same convolution (of the values ``x`` and ``w`` hold)."""
    x = np.asarray(x).astype(np.float64)
    w = np.asarray(w).astype(np.float64)
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = (h + 2 * padding - kh) // stride + 1
    wo = (wd + 2 * padding - kw) // stride + 1
    xp = np.zeros((n, cin, h + 2 * padding, wd + 2 * padding))
    xp[:, :, padding:padding + h, padding:padding + wd] = x
    out = np.zeros((n, cout, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return np.maximum(out, 0) if relu else out


# --- vector kernels ------------------------------------------------------------------------------------

@ns.kernel
def polynomial(x, y, total: int, degree: int = 8, tile: int = 8192) -> None:
    """``y = p(x)`` with a degree-``degree`` polynomial evaluated by Horner's rule (``degree`` multiplies
    and adds per element): a vector-bound kernel, to compare fp16 with fp32 on the vector unit."""
    dt = x.dtype
    pipe = ns.TPipe()
    q_in, q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
    pipe.init_buffer(q_in, 2, tile * dt.itemsize)
    pipe.init_buffer(q_out, 2, tile * dt.itemsize)
    for off in range(0, total, tile):
        cnt = min(tile, total - off)
        t = q_in.alloc_tensor(dt)
        copy(t, x[off:], cnt)
        q_in.enque(t)
        t = q_in.deque()
        o = q_out.alloc_tensor(dt)
        ns.duplicate(o, 0.5, cnt)
        for _ in range(degree):                     # o = o * x + 0.5
            ns.mul(o, o, t, cnt)
            ns.adds(o, o, 0.5, cnt)
        q_out.enque(o)
        q_in.free_tensor(t)
        o = q_out.deque()
        copy(y[off:], o, cnt)
        q_out.free_tensor(o)


@ns.kernel
def scale_to_half(g, g16, total: int, scale: float, tile: int = 8192) -> None:
    """``g16 = fp16(g * scale)`` on the vector unit (fp32 multiply, then a round-to-nearest cast): how
    gradients are scaled into fp16's range before they are stored as fp16."""
    pipe = ns.TPipe()
    q_in, q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
    pipe.init_buffer(q_in, 2, tile * 4)
    pipe.init_buffer(q_out, 2, tile * 2)
    for off in range(0, total, tile):
        cnt = min(tile, total - off)
        t = q_in.alloc_tensor(ns.float32)
        copy(t, g[off:], cnt)
        q_in.enque(t)
        t = q_in.deque()
        ns.muls(t, t, scale, cnt)
        o = q_out.alloc_tensor(ns.float16)
        ns.cast(o, t, ns.RoundMode.CAST_RINT, cnt)
        q_out.enque(o)
        q_in.free_tensor(t)
        o = q_out.deque()
        copy(g16[off:], o, cnt)
        q_out.free_tensor(o)


__all__ = ["FP16_ACC", "default_tiling", "run_gemm", "LayerResult", "conv_layer",
           "conv_reference", "polynomial", "scale_to_half"]
