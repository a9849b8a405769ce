"""Kernels of lab 05 (FP16 precision): a matmul whose L0C accumulator type you choose, a Conv2D layer
built on it (im2col on the host), and two small vector kernels.

Why a separate matmul: :mod:`npusim.conv` and :mod:`npusim.kernels.matmul` always accumulate in fp32,
as the A2 Cube does. To *see* what fp16 accumulation costs, :func:`gemm` takes ``acc_dtype``:

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

from ..conv.common import load_fractals
from .common import copy
from .matmul import copy_strips

FP16_ACC = ns.a2.replace(name="a2-fp16acc", cube_fp16_accumulate=True)
"""The A2 preset with the teaching option that lets Mmad accumulate fp16 into an fp16 L0C."""


def _up(v: int, m: int) -> int:
    return -(-v // m) * m


@dataclass(frozen=True)
class GemmTiling:
    """Base block sizes (elements) of :func:`gemm`: ``base_n`` a multiple of 16, ``base_k`` of K0."""

    base_m: int = 128
    base_n: int = 64
    base_k: int = 128
    buffer_num: int = 2


def default_tiling(m: int, n: int, k: int, dtype) -> GemmTiling:
    """Tiles that fit every buffer twice: A and B tiles <= 32 KB each (L0A/L0B hold 64 KB), the fp32
    accumulator <= 64 KB (L0C 128 KB)."""
    isz = np.dtype(dtype).itemsize
    k0 = 32 // isz
    bm = min(128, _up(m, 16))
    bn = min(128, _up(n, 16))
    bk = max(k0, min(_up(k, k0), (32 * 1024 // (max(bm, bn) * isz)) // k0 * k0))
    return GemmTiling(bm, bn, bk, 2)


@ns.kernel
def gemm(a, b_zn, c, m: int, n: int, k: int, acc_dtype: str = "float32", relu: bool = False,
         tiling: GemmTiling = GemmTiling()) -> None:
    """``c[:m, :n] = relu?(a[:m, :k] @ B)``: ``a`` ND in GM, B given as ZN fractals ``(K1, N1, 16, K0)``,
    the accumulator in L0C of ``acc_dtype``, Fixpipe casting to ``c``'s dtype (with ReLU if asked)."""
    t = tiling
    dt = a.dtype
    k0 = 32 // dt.itemsize
    acc = np.dtype(acc_dtype)
    if t.base_n % 16 or t.base_k % k0:
        raise ns.UsageError(f"gemm tiling needs base_n a multiple of 16 and base_k of {k0}, got {t}")
    n1_all = -(-n // 16)
    bm16, bn16 = _up(t.base_m, 16), _up(t.base_n, 16)
    pipe = ns.TPipe()
    q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
    q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
    q_co1 = ns.TQue(ns.TPosition.CO1)
    pipe.init_buffer(q_a1, t.buffer_num, bm16 * t.base_k * dt.itemsize)
    pipe.init_buffer(q_b1, t.buffer_num, t.base_k * bn16 * dt.itemsize)
    pipe.init_buffer(q_a2, t.buffer_num, bm16 * t.base_k * dt.itemsize)
    pipe.init_buffer(q_b2, t.buffer_num, t.base_k * bn16 * dt.itemsize)
    pipe.init_buffer(q_co1, t.buffer_num, bm16 * bn16 * acc.itemsize)
    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
    for tile in range(ns.get_block_idx(), tiles_m * tiles_n, ns.get_block_num()):
        i0, j0 = (tile // tiles_n) * t.base_m, (tile % tiles_n) * t.base_n
        tm, tn = min(t.base_m, m - i0), min(t.base_n, n - j0)
        m1, n1 = -(-tm // 16), -(-tn // 16)
        c_l0 = q_co1.alloc_tensor(acc)
        for kk in range(0, k, t.base_k):
            tk = min(t.base_k, k - kk)
            k1 = -(-tk // k0)
            a_l1 = q_a1.alloc_tensor(dt)
            copy_strips(a_l1, a[i0 * k + kk:], tm, tk, k)          # 16-row NZ strips = ZZ order
            q_a1.enque(a_l1)
            b_l1 = q_b1.alloc_tensor(dt)                            # k1 rows of n1 ZN fractals
            ns.data_copy(b_l1, b_zn[((kk // k0) * n1_all + j0 // 16) * 16 * k0:],
                         ns.DataCopyParams(block_count=k1, block_len=n1 * 16, src_stride=(n1_all - n1) * 16))
            q_b1.enque(b_l1)
            a_l1, b_l1 = q_a1.deque(), q_b1.deque()
            a_l0 = q_a2.alloc_tensor(dt)
            load_fractals(a_l0, a_l1, 0, m1 * k1)
            q_a2.enque(a_l0)
            b_l0 = q_b2.alloc_tensor(dt)
            load_fractals(b_l0, b_l1, 0, k1 * n1)
            q_b2.enque(b_l0)
            q_a1.free_tensor(a_l1)
            q_b1.free_tensor(b_l1)
            a_l0, b_l0 = q_a2.deque(), q_b2.deque()
            ns.mmad(c_l0, a_l0, b_l0, ns.MmadParams(tm, tn, tk, cmatrix_init_val=(kk == 0)))
            q_a2.free_tensor(a_l0)
            q_b2.free_tensor(b_l0)
        q_co1.enque(c_l0)
        c_l0 = q_co1.deque()
        ns.fixpipe(c[i0 * n + j0:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=n, relu=relu))
        q_co1.free_tensor(c_l0)


def run_gemm(a: np.ndarray, b: np.ndarray, *, acc_dtype: str = "float32", out_dtype=None, relu: bool = False,
             tiling: GemmTiling | None = None, config=None, block_dim: int = 1,
             sanitize: str = "error") -> ns.LaunchResult:
    """Launch :func:`gemm` on ``a @ b`` (``b`` packed to ZN here, on the host); ``result["c"]``.

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
    return ns.launch(gemm, block_dim, a, b_zn, out, m, n, k, np.dtype(acc_dtype).name, relu, t, config=config,
                     sanitize=sanitize)


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
               out_dtype=None, relu: bool = False, config=None, tiling: GemmTiling | None = None,
               sanitize: str = "error") -> LayerResult:
    """One Conv2D (NCHW ``x``, (Cout, Cin, Kh, Kw) ``w``, same dtype) as host im2col + :func:`gemm`."""
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


__all__ = ["FP16_ACC", "GemmTiling", "default_tiling", "gemm", "run_gemm", "LayerResult", "conv_layer",
           "conv_reference", "polynomial", "scale_to_half"]
