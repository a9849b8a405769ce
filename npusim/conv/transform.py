"""Layout transforms on the device: NCHW -> NC1HWC0 (input) and NHWC -> NCHW (output of img2col).

Both are transposes: NCHW keeps the positions of one channel together, NC1HWC0/NHWC keep the channels
of one position together. npusim's vector unit has no transpose instruction (Ascend's TransDataTo5HD),
and a DMA moves contiguous runs, so the transform is done where a transpose exists, on the Cube:

- The NZ fractals that ``data_copy(Nd2NzParams)`` builds in L1 from a matrix X are, read as L0B's ZN
  layout, the fractals of X^T (a ZN fractal holds 16 columns of K0 rows, an NZ fractal 16 rows of C0
  columns: the same bytes).
- So ``load_data`` (no transpose, any dtype) puts X^T in L0B, an Mmad with the identity in L0A
  writes I @ X^T = X^T to L0C, and Fixpipe writes it to GM as ND rows: the transposed layout.

Each transform is its own kernel launch with its own Profile (``ConvResult.transforms``): it costs a
read and a write of the tensor (MTE2 and FIX), plus Cube time for the identity Mmads (counted as MACs
in the transform's profile, never in the convolution's). Integer tensors cannot take this path (the
int8 Cube accumulates into int32, and Fixpipe cannot narrow back to int8; there is no int32 Cube), so
they fall back to an element-by-element DMA transpose: each element is its own burst on MTE2 and again
on MTE3, which the profile shows as very slow. That is what a transpose costs without a transpose unit.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from .common import FRACTAL_BYTES, Drain, ceil_div, fractal, load_fractals, pipelined, round_up
from .geometry import my_items
from .host import identity_zz

SLOTS = 2048
"""Elements per DMA of the element-wise fallback (one 32 B UB slot each)."""


def cube_transposes(dtype, cfg: ns.HardwareConfig) -> bool:
    """Whether ``dtype`` can be transposed on the Cube of ``cfg`` (float types it multiplies)."""
    name = np.dtype(dtype).name
    return name in ("float16", "bfloat16", "float32") and name in cfg.cube_macs_per_cycle


# ================================================================================================
# NCHW -> NC1HWC0 on the Cube
# ================================================================================================
class KernelToNc1hwc0:
    """Transpose each (C0 channels x P positions) piece of an NCHW plane into (P x C0) rows of NC1HWC0.

    With ``pad`` the output is the zero-padded image (N, C1, H + 2ph, W + 2pw, C0): the layout variant
    reads it with no bounds checks at all. The borders are written from a UB buffer of zeros (MTE3).
    """

    def __init__(self, x, eye, x5, shape, pad, chunk):
        self.x, self.eye, self.x5 = x, eye, x5
        self.n, self.c, self.h, self.w = shape
        self.ph, self.pw = pad
        dt = x.dtype
        self.dt = dt
        self.c0 = 32 // dt.itemsize
        self.c1 = ceil_div(self.c, self.c0)
        self.hp, self.wp = self.h + 2 * self.ph, self.w + 2 * self.pw
        # positions per Mmad: a padded output row is contiguous only within one input row
        self.p = min(chunk, round_up(self.w, 16)) if self.pw or self.ph else chunk
        p = self.p
        self.pipe = ns.TPipe()
        self.q_eye = ns.TQue(ns.TPosition.A1)
        self.q_x = ns.TQue(ns.TPosition.B1)
        self.q_a2 = ns.TQue(ns.TPosition.A2)
        self.q_b2 = ns.TQue(ns.TPosition.B2)
        self.q_acc = ns.TQue(ns.TPosition.CO1)
        isz = dt.itemsize
        self.pipe.init_buffer(self.q_eye, 1, p * p * isz)
        self.pipe.init_buffer(self.q_x, 2, ceil_div(p, self.c0) * FRACTAL_BYTES)
        self.pipe.init_buffer(self.q_a2, 2, p * p * isz)   # the identity, and the one for the short tail
        self.pipe.init_buffer(self.q_b2, 2, ceil_div(p, self.c0) * FRACTAL_BYTES)
        self.pipe.init_buffer(self.q_acc, 2, p * 16 * 4)
        self.drain = Drain(self.pipe, ns.float32, dt, p * 16)
        if self.ph or self.pw:
            self.zeros = ns.TBuf(ns.TPosition.VECCALC)
            self.zero_units = max(self.ph * self.wp, self.h * self.pw, 1)  # 32 B units
            self.pipe.init_buffer(self.zeros, self.zero_units * 32)

    def process(self) -> None:
        jobs = []
        for n, c1 in my_items([(n, c1) for n in range(self.n) for c1 in range(self.c1)]):
            if self.ph or self.pw:
                self.write_borders(n, c1)
                jobs += [(n, c1, h * self.w + w0, min(self.p, self.w - w0), h, w0)
                         for h in range(self.h) for w0 in range(0, self.w, self.p)]
            else:
                jobs += [(n, c1, p0, min(self.p, self.h * self.w - p0), 0, p0)
                         for p0 in range(0, self.h * self.w, self.p)]
        if not jobs:
            return
        self.load_identities({job[3] for job in jobs})
        pipelined(jobs, self.copy_in, self.transpose, depth=2)
        for a in self.identity.values():
            self.q_a2.free_tensor(a)

    def load_identities(self, counts: set[int]) -> None:
        """The identity I_P in L0A, and I_t for the short last piece (t positions) of a row or plane:
        the top-left of I_P, picked fractal by fractal, because a ZZ matrix with K = t has
        ceil(t / K0) fractals per 16-row strip instead of P / K0. (At most two sizes occur.)"""
        p, k0 = self.p, self.c0
        eye = self.q_eye.alloc_tensor(self.dt)
        ns.data_copy(eye, self.eye, p * p)
        self.q_eye.enque(eye)
        eye = self.q_eye.deque()
        self.identity = {}
        for cnt in sorted(counts, reverse=True):
            a = self.q_a2.alloc_tensor(self.dt)
            k1 = ceil_div(cnt, k0)
            if cnt == p:
                load_fractals(a, eye, 0, (p // 16) * k1)
            else:
                for m1 in range(ceil_div(cnt, 16)):
                    load_fractals(a[m1 * k1 * fractal(self.dt):], eye, m1 * (p // k0), k1)
            self.q_a2.enque(a)
            self.identity[cnt] = self.q_a2.deque()
        self.q_eye.free_tensor(eye)

    def write_borders(self, n: int, c1: int) -> None:
        """Zero the padding of one (n, c1) image: top and bottom rows, left and right columns (MTE3)."""
        if not hasattr(self, "zeros_ready"):
            ns.duplicate(self.zeros.get(self.dt), 0, self.zero_units * self.c0)
            ns.set_flag(ns.HardEvent.V_MTE3, 0)
            ns.wait_flag(ns.HardEvent.V_MTE3, 0)
            self.zeros_ready = True
        z = self.zeros.get(self.dt)
        base = (n * self.c1 + c1) * self.hp * self.wp * self.c0
        if self.ph:
            ns.data_copy(self.x5[base:], z, self.ph * self.wp * self.c0)
            ns.data_copy(self.x5[base + (self.ph + self.h) * self.wp * self.c0:], z, self.ph * self.wp * self.c0)
        if self.pw:
            first = base + self.ph * self.wp * self.c0
            gap = self.wp - self.pw
            ns.data_copy(self.x5[first:], z, ns.DataCopyParams(self.h, self.pw, 0, gap))
            ns.data_copy(self.x5[first + (self.pw + self.w) * self.c0:], z, ns.DataCopyParams(self.h, self.pw, 0, gap))

    def copy_in(self, job) -> None:
        """C0 channel rows of ``cnt`` positions, GM -> L1 as NZ (MTE2): long runs of one NCHW plane."""
        n, c1, p0, cnt, _, _ = job
        nch = min(self.c0, self.c - c1 * self.c0)
        t = self.q_x.alloc_tensor(self.dt)
        src = ((n * self.c + c1 * self.c0) * self.h * self.w) + p0
        ns.data_copy(t, self.x[src:], ns.Nd2NzParams(n_value=nch, d_value=cnt, src_d_value=self.h * self.w))
        self.q_x.enque(t)

    def transpose(self, job) -> None:
        n, c1, p0, cnt, h, w0 = job
        k0 = self.c0
        x_l1 = self.q_x.deque()
        b = self.q_b2.alloc_tensor(self.dt)
        load_fractals(b, x_l1, 0, ceil_div(cnt, k0))   # NZ of (C0 x cnt) = ZN of its transpose (cnt x C0)
        self.q_b2.enque(b)
        self.q_x.free_tensor(x_l1)
        b = self.q_b2.deque()
        acc = self.q_acc.alloc_tensor(ns.float32)
        ns.mmad(acc, self.identity[cnt], b, ns.MmadParams(cnt, k0, cnt))  # I @ X^T
        self.q_b2.free_tensor(b)
        self.q_acc.enque(acc)
        acc = self.q_acc.deque()
        if self.ph or self.pw:
            dst = (((n * self.c1 + c1) * self.hp + h + self.ph) * self.wp + w0 + self.pw) * k0
        else:
            dst = ((n * self.c1 + c1) * self.h * self.w + p0) * k0
        self.drain(self.x5[dst:], acc, cnt, k0, round_up(cnt, 16), k0)
        self.q_acc.free_tensor(acc)


@ns.kernel
def nchw_to_nc1hwc0(x, eye, x5, shape: tuple, pad: tuple = (0, 0), chunk: int = 128) -> None:
    """``x5`` (N, C1, H+2ph, W+2pw, C0) = ``x`` (N, C, H, W) in NC1HWC0, zero-padded; on the Cube."""
    KernelToNc1hwc0(x, eye, x5, shape, pad, chunk).process()


# ================================================================================================
# NHWC -> NCHW on the Cube
# ================================================================================================
class KernelToNchw:
    """Transpose (P positions x C channels) NHWC pieces into (C x P) rows of NCHW, 16 channels per Mmad."""

    def __init__(self, y, eye, out, shape, chunk):
        self.y, self.eye, self.out = y, eye, out
        self.n, self.hw, self.c = shape
        dt = y.dtype
        self.dt = dt
        self.k0 = 32 // dt.itemsize
        # positions per piece: the piece (all C channels) is double-buffered in a quarter of L1
        fit = ns.get_core_config().l1_bytes // 4 // (ceil_div(self.c, self.k0) * 32) // 16 * 16
        self.p = max(16, min(chunk, round_up(self.hw, 16), fit))
        isz = dt.itemsize
        self.pipe = ns.TPipe()
        self.q_eye = ns.TQue(ns.TPosition.A1)
        self.q_y = ns.TQue(ns.TPosition.B1)
        self.q_a2 = ns.TQue(ns.TPosition.A2)
        self.q_b2 = ns.TQue(ns.TPosition.B2)
        self.q_acc = ns.TQue(ns.TPosition.CO1)
        self.pipe.init_buffer(self.q_eye, 1, 16 * 16 * isz)
        self.pipe.init_buffer(self.q_y, 2, ceil_div(self.c, self.k0) * self.p * 32)
        self.pipe.init_buffer(self.q_a2, 1, 16 * 16 * isz)
        self.pipe.init_buffer(self.q_b2, 2, self.p * 32 * (16 // self.k0))
        self.pipe.init_buffer(self.q_acc, 2, self.p * 16 * 4)
        self.drain = Drain(self.pipe, ns.float32, dt, self.p * 16)

    def process(self) -> None:
        jobs = my_items([(n, p0, min(self.p, self.hw - p0)) for n in range(self.n) for p0 in range(0, self.hw, self.p)])
        if not jobs:
            return
        eye = self.q_eye.alloc_tensor(self.dt)
        ns.data_copy(eye, self.eye, 256)
        self.q_eye.enque(eye)
        eye = self.q_eye.deque()
        a = self.q_a2.alloc_tensor(self.dt)
        load_fractals(a, eye, 0, 16 // self.k0)   # I_16 (ZZ), resident for the whole kernel
        self.q_a2.enque(a)
        self.eye16 = self.q_a2.deque()
        self.q_eye.free_tensor(eye)
        pipelined(jobs, self.copy_in, self.transpose, depth=2)
        self.q_a2.free_tensor(self.eye16)

    def copy_in(self, job) -> None:
        """``cnt`` NHWC rows (all channels of one position each), GM -> L1 as NZ (MTE2)."""
        n, p0, cnt = job
        t = self.q_y.alloc_tensor(self.dt)
        ns.data_copy(t, self.y[(n * self.hw + p0) * self.c:], ns.Nd2NzParams(n_value=cnt, d_value=self.c))
        self.q_y.enque(t)

    def transpose(self, job) -> None:
        n, p0, cnt = job
        k0 = self.k0
        n1 = ceil_div(cnt, 16)
        y_l1 = self.q_y.deque()
        for cb in range(0, self.c, 16):
            nch = min(16, self.c - cb)
            b = self.q_b2.alloc_tensor(self.dt)
            # NZ of (cnt x C) is ZN of (C x cnt): the rows of channels cb..cb+15 are 16/K0 fractal rows
            load_fractals(b, y_l1, (cb // k0) * n1, ceil_div(nch, k0) * n1)
            self.q_b2.enque(b)
            b = self.q_b2.deque()
            acc = self.q_acc.alloc_tensor(ns.float32)
            ns.mmad(acc, self.eye16, b, ns.MmadParams(nch, cnt, nch))   # I @ Y^T: channels x positions
            self.q_b2.free_tensor(b)
            self.q_acc.enque(acc)
            acc = self.q_acc.deque()
            self.drain(self.out[(n * self.c + cb) * self.hw + p0:], acc, nch, cnt, 16, self.hw)
            self.q_acc.free_tensor(acc)
        self.q_y.free_tensor(y_l1)


@ns.kernel
def nhwc_to_nchw(y, eye, out, shape: tuple, chunk: int = 512) -> None:
    """``out`` (N, C, HW) = ``y`` (N, HW, C) transposed per image; on the Cube."""
    KernelToNchw(y, eye, out, shape, chunk).process()


# ================================================================================================
# The element-wise DMA fallback (integers)
# ================================================================================================
@ns.kernel
def gather_scatter(src, dst, runs: list, zero_fill: int = 0) -> None:
    """``dst[d + i * dst_pitch] = src[s + i * src_pitch]`` for every ``(s, src_pitch, d, dst_pitch, count)``
    in ``runs``, one element per DMA burst: GM -> UB puts each element in its own 32 B slot (MTE2),
    UB -> GM writes each slot's element at its place (MTE3). ``zero_fill`` first zeroes that many
    elements of ``dst`` (the padding), on MTE3 too so that the writes stay in order."""
    isz = src.dtype.itemsize
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 2, SLOTS * 32)
    if zero_fill:  # (launched on one block: the zeros and the elements then share one MTE3, in order)
        zeros = ns.TBuf(ns.TPosition.VECCALC)
        pipe.init_buffer(zeros, 16 * 1024)
        z = zeros.get(dst.dtype)
        ns.duplicate(z, 0, z.size)
        ns.set_flag(ns.HardEvent.V_MTE3, 0)
        ns.wait_flag(ns.HardEvent.V_MTE3, 0)
        for off in range(0, zero_fill, z.size):
            ns.data_copy_pad(dst[off:], z, min(z.size, zero_fill - off))
    for s, sp, d, dp, count in my_items(runs):
        for i0 in range(0, count, SLOTS):
            cnt = min(SLOTS, count - i0)
            t = q.alloc_tensor(src.dtype)
            ns.data_copy_pad(t, src[s + i0 * sp:], ns.DataCopyExtParams(cnt, isz, (sp - 1) * isz, 0))
            q.enque(t)
            t = q.deque()
            ns.data_copy_pad(dst[d + i0 * dp:], t, ns.DataCopyExtParams(cnt, isz, 0, (dp - 1) * isz))
            q.free_tensor(t)


# ================================================================================================
# Host-side launchers
# ================================================================================================
def to_nc1hwc0(x: np.ndarray, pad: tuple[int, int] = (0, 0), *, config=None, block_dim: int = 1,
               sanitize: str = "error") -> tuple[np.ndarray, ns.Profile]:
    """Run the NCHW -> NC1HWC0 transform on the device; returns the (N, C1, H+2ph, W+2pw, C0) array
    and the transform's own Profile."""
    cfg = ns.get_config(config)
    n, c, h, w = x.shape
    dt = x.dtype
    c0 = 32 // dt.itemsize
    c1 = ceil_div(c, c0)
    ph, pw = pad
    hp, wp = h + 2 * ph, w + 2 * pw
    x5 = np.empty((n, c1, hp, wp, c0), dtype=dt)
    x = np.ascontiguousarray(x)
    if cube_transposes(dt, cfg):
        chunk = 128 if dt.itemsize == 2 else 64   # I_P in L0A: P * P elements, two of them
        eye = identity_zz(min(chunk, round_up(w, 16)) if (ph or pw) else chunk, dt)
        res = ns.launch(nchw_to_nc1hwc0, block_dim, x, eye, x5, (n, c, h, w), (ph, pw), chunk, config=cfg,
                        sanitize=sanitize)
        return res["x5"], res.profile
    runs = []
    for b in range(n):
        for ch in range(c):
            src = (b * c + ch) * h * w
            dst0 = ((b * c1 + ch // c0) * hp * wp) * c0 + ch % c0
            if ph or pw:
                runs += [(src + r * w, 1, dst0 + ((r + ph) * wp + pw) * c0, c0, w) for r in range(h)]
            else:
                runs.append((src, 1, dst0, c0, h * w))
    res = ns.launch(gather_scatter, 1, x, x5, runs, x5.size, config=cfg, sanitize=sanitize)
    return res["dst"], res.profile


def to_nchw(y: np.ndarray, *, config=None, block_dim: int = 1,
            sanitize: str = "error") -> tuple[np.ndarray, ns.Profile]:
    """Run the NHWC -> NCHW transform on the device; returns the NCHW array and its Profile."""
    cfg = ns.get_config(config)
    n, h, w, c = y.shape
    dt = y.dtype
    out = np.empty((n, c, h, w), dtype=dt)
    y = np.ascontiguousarray(y)
    if cube_transposes(dt, cfg):
        res = ns.launch(nhwc_to_nchw, block_dim, y, identity_zz(16, dt), out, (n, h * w, c), config=cfg,
                        sanitize=sanitize)
        return res["out"], res.profile
    runs = [(b * h * w * c + ch, c, (b * c + ch) * h * w, 1, h * w) for b in range(n) for ch in range(c)]
    res = ns.launch(gather_scatter, block_dim, y, out, runs, config=cfg, sanitize=sanitize)
    return res["dst"], res.profile
