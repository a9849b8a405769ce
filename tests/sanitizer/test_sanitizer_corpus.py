"""A corpus of learner kernels, each with one planted bug and a correct twin.

Every bug must be reported with its class, the buffer or tensor by name, the learner's source line (the
line of this file marked ``# BUG: <case>``) and a hint that names the fix; ``sanitize="warn"`` must finish
(no hang) for the recoverable ones. Every twin, the hand-synchronised ping-pong pipelines included, must
run clean: no error and no warning.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest

import npusim as ns
from npusim.checks._core import CheckFailed, call_learner
from npusim.pipes import PIPES

pytestmark = pytest.mark.sanitizer

H = ns.HardEvent
P = ns.TPosition
HERE = os.path.basename(__file__)
with open(__file__) as _f:
    _SOURCE = _f.read().splitlines()


def site(case: str) -> str:
    """``file:line`` of the line of this file that ends with ``# BUG: <case>``."""
    (i,) = [i for i, s in enumerate(_SOURCE) if s.rstrip().endswith(f"# BUG: {case}")]
    return f"{HERE}:{i + 1}"


def f16(n: int, start: float = 0.0) -> np.ndarray:
    return (np.arange(n) % 64 + start).astype(np.float16)


# ---------------------------------------------------------------------------------------------------------
# vector kernels (GM -> UB -> GM through queues, as in lab 01)
# ---------------------------------------------------------------------------------------------------------
class KernelAdd:
    """``z = x + y`` in tiles, written like the Ascend C sample; ``bug`` plants one mistake."""

    def __init__(self, x, y, z, tile: int, bug: str):
        self.x, self.y, self.z, self.tile, self.bug = x, y, z, tile, bug
        self.pipe = ns.TPipe()
        self.in_x, self.in_y = ns.TQue(P.VECIN), ns.TQue(P.VECIN)
        self.out_z = ns.TQue(P.VECOUT)
        self.pipe.init_buffer(self.in_x, 2, tile * x.dtype.itemsize)
        self.pipe.init_buffer(self.in_y, 2, tile * 4)
        if bug != "no_init_buffer":
            self.pipe.init_buffer(self.out_z, 2, tile * z.dtype.itemsize)

    def process(self) -> None:
        for off in range(0, len(self.x), self.tile):
            self.copy_in(off)
            self.compute()
            self.copy_out(off)

    def copy_in(self, off: int) -> None:
        # the planted bug: a hard-coded float16 for x, whatever the GM tensor holds
        x_local = self.in_x.alloc_tensor(ns.float16 if self.bug == "fp32_gm_into_fp16" else self.x.dtype)
        ns.data_copy(x_local, self.x[off:], self.tile)  # BUG: fp32_gm_into_fp16
        y_local = self.in_y.alloc_tensor(self.y.dtype)
        if self.bug != "y_never_copied":
            ns.data_copy(y_local, self.y[off:], self.tile)
        self.in_x.enque(x_local)
        self.in_y.enque(y_local)

    def compute(self) -> None:
        x_local, y_local = self.in_x.deque(), self.in_y.deque()
        z_local = self.out_z.alloc_tensor(self.z.dtype)  # BUG: no_init_buffer
        if self.bug == "mixed_dtypes":
            ns.add(z_local, x_local, y_local, self.tile)  # BUG: mixed_dtypes
        elif self.bug == "mixed_dtypes_twin":  # cast y to z's dtype first
            ns.cast(z_local, y_local, ns.RoundMode.CAST_RINT, self.tile)
            ns.add(z_local, x_local, z_local, self.tile)
        elif self.bug == "cast_x":  # x arrived as float32, as in GM: cast it in UB
            ns.cast(z_local, x_local, ns.RoundMode.CAST_RINT, self.tile)
            ns.add(z_local, z_local, y_local, self.tile)
        elif self.bug == "z_never_computed":
            pass
        else:
            ns.add(z_local, x_local, y_local, self.tile)  # BUG: y_never_copied
        self.out_z.enque(z_local)
        self.in_x.free_tensor(x_local)
        self.in_y.free_tensor(y_local)

    def copy_out(self, off: int) -> None:
        z_local = self.out_z.deque()
        ns.data_copy(self.z[off:], z_local, self.tile)  # BUG: z_never_computed
        self.out_z.free_tensor(z_local)


@ns.kernel
def add_kernel(x, y, z, tile, bug):
    KernelAdd(x, y, z, tile, bug).process()


@ns.kernel
def minus_one(x, z, bug):
    """``z = x - 1`` in int32: unwritten UB reads -1, so the wrong answer looks plausible."""
    pipe = ns.TPipe()
    q_x, q_z = ns.TQue(P.VECIN), ns.TQue(P.VECOUT)
    pipe.init_buffer(q_x, 1, len(x) * 4)
    pipe.init_buffer(q_z, 1, len(x) * 4)
    x_local = q_x.alloc_tensor(ns.int32)
    if bug != "int32_never_copied":
        ns.data_copy(x_local, x, len(x))
    q_x.enque(x_local)
    x_local = q_x.deque()
    z_local = q_z.alloc_tensor(ns.int32)
    ns.adds(z_local, x_local, -1, len(x))  # BUG: int32_never_copied
    q_z.enque(z_local)
    q_x.free_tensor(x_local)
    z_local = q_z.deque()
    ns.data_copy(z, z_local, len(x))
    q_z.free_tensor(z_local)


@ns.kernel
def tail_add_one(x, y, n):
    """A tail of any length: data_copy_pad in (padded to 32 B), compute on whole 32 B, copy_pad out."""
    pipe = ns.TPipe()
    q_in, q_out = ns.TQue(P.VECIN), ns.TQue(P.VECOUT)
    padded = -(-n // 16) * 16
    pipe.init_buffer(q_in, 1, padded * 2)
    pipe.init_buffer(q_out, 1, padded * 2)
    t = q_in.alloc_tensor(ns.float16)
    ns.data_copy_pad(t, x, n)
    q_in.enque(t)
    t = q_in.deque()
    o = q_out.alloc_tensor(ns.float16)
    ns.adds(o, t, 1.0, padded)  # reads the padding data_copy_pad wrote
    q_out.enque(o)
    q_in.free_tensor(t)
    o = q_out.deque()
    ns.data_copy_pad(y, o, n)
    q_out.free_tensor(o)


@ns.kernel
def copy_through(x, y, tile, bug):
    """GM -> UB -> GM without compute (and, with ``bug="compute_on_bind"``, a compute step)."""
    pipe = ns.TPipe()
    if bug == "vecout_for_copy":
        q = ns.TQue(P.VECOUT)
    else:
        q = ns.TQueBind(P.VECIN, P.VECOUT)
    pipe.init_buffer(q, 2, tile * 2)
    for off in range(0, len(x), tile):
        t = q.alloc_tensor(ns.float16)
        ns.data_copy(t, x[off:], tile)
        q.enque(t)
        t = q.deque()
        if bug == "compute_on_bind":
            ns.muls(t, t, 2.0, tile)  # BUG: compute_on_bind
        ns.data_copy(y[off:], t, tile)  # BUG: vecout_for_copy
        q.free_tensor(t)


@ns.kernel
def double_it(x, y, tile):
    """The twin of compute_on_bind: VECIN in, compute into VECOUT, VECOUT out."""
    pipe = ns.TPipe()
    q_in, q_out = ns.TQue(P.VECIN), ns.TQue(P.VECOUT)
    pipe.init_buffer(q_in, 2, tile * 2)
    pipe.init_buffer(q_out, 2, tile * 2)
    for off in range(0, len(x), tile):
        t = q_in.alloc_tensor(ns.float16)
        ns.data_copy(t, x[off:], tile)
        q_in.enque(t)
        t = q_in.deque()
        o = q_out.alloc_tensor(ns.float16)
        ns.muls(o, t, 2.0, tile)
        q_out.enque(o)
        q_in.free_tensor(t)
        o = q_out.deque()
        ns.data_copy(y[off:], o, tile)
        q_out.free_tensor(o)


@ns.kernel
def shifted_tiles(x, y, tile, bug):
    """Copies tile i of x shifted by one tile back; the first tile's offset is negative when not guarded."""
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, tile * 2)
    t = buf.get(ns.float16)
    for off in range(0, len(x), tile):
        start = off - tile if bug == "negative_offset" else max(0, off - tile)
        src = x[-100:] if bug == "negative_index" else x[start:]  # BUG: negative_offset
        ns.data_copy(t, src, tile)
        ns.pipe_barrier(ns.Pipe.ALL)
        ns.data_copy(y[off:], t, tile)
        ns.pipe_barrier(ns.Pipe.ALL)


@ns.kernel
def last_tile(x, tile, guard):
    """Copies every tile of x; without the guard the last, shorter tile runs past the end."""
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, tile * 2)
    for off in range(0, len(x), tile):
        n = min(tile, len(x) - off) if guard else tile
        ns.data_copy(buf.get(ns.float16), x[off:], n)  # BUG: past_the_end


# ---------------------------------------------------------------------------------------------------------
# hand-synchronised ping-pong: two halves of one TBuf, set_flag/wait_flag with event ids 0 and 1
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def ping_pong(x, y, tile, bug):
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, 2 * tile * 2)
    halves = (buf.get(ns.float16)[:tile], buf.get(ns.float16)[tile:])
    ns.set_flag(H.MTE3_MTE2, 0)  # both halves start free
    ns.set_flag(H.MTE3_MTE2, 1)
    for i, off in enumerate(range(0, len(x), tile)):
        t, e = halves[i % 2], i % 2
        if bug != "missing_war_wait":
            ns.wait_flag(H.MTE3_MTE2, e)  # the half's previous copy-out is done
        ns.data_copy(t, x[off:], tile)  # BUG: missing_war_wait
        ns.set_flag(H.MTE2_V, e)
        ns.wait_flag(H.MTE2_V, e)
        ns.muls(t, t, 2.0, tile)
        ns.set_flag(H.V_MTE3, e)
        ns.wait_flag(H.V_MTE3, e)
        ns.data_copy(y[off:], t, tile)
        if bug != "missing_war_wait":
            ns.set_flag(H.MTE3_MTE2, e)
    ns.wait_flag(H.MTE3_MTE2, 0)
    ns.wait_flag(H.MTE3_MTE2, 1)


@ns.kernel
def ping_pong_prefetch(x, y, tile):
    """Ping-pong where the copy-in of tile i + 1 is issued before the compute of tile i."""
    pipe = ns.TPipe()
    buf = ns.TBuf()
    pipe.init_buffer(buf, 2 * tile * 2)
    halves = (buf.get(ns.float16)[:tile], buf.get(ns.float16)[tile:])
    n = len(x) // tile
    ns.data_copy(halves[0], x, tile)
    ns.set_flag(H.MTE2_V, 0)
    for i in range(n):
        t, e = halves[i % 2], i % 2
        if i + 1 < n:
            if i >= 1:
                ns.wait_flag(H.MTE3_MTE2, 1 - e)  # the other half was copied out
            ns.data_copy(halves[1 - e], x[(i + 1) * tile:], tile)
            ns.set_flag(H.MTE2_V, 1 - e)
        ns.wait_flag(H.MTE2_V, e)
        ns.adds(t, t, 1.0, tile)
        ns.set_flag(H.V_MTE3, e)
        ns.wait_flag(H.V_MTE3, e)
        ns.data_copy(y[i * tile:], t, tile)
        if i + 2 < n:
            ns.set_flag(H.MTE3_MTE2, e)


# ---------------------------------------------------------------------------------------------------------
# a one-tile matmul (m, n <= 16), K in steps: GM -> L1 (Nd2Nz) -> L0A/L0B -> mmad -> L0C -> fixpipe
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def matmul_k(a, b, c, m, n, k, base_k, bug):
    pipe = ns.TPipe()
    q_a1, q_b1, q_a2, q_b2 = ns.TQue(P.A1), ns.TQue(P.B1), ns.TQue(P.A2), ns.TQue(P.B2)
    q_co1 = ns.TQue(P.CO1)
    kk16 = -(-base_k // 16) * 16
    for q in (q_a1, q_b1, q_a2, q_b2):
        pipe.init_buffer(q, 2, 16 * kk16 * 2)
    pipe.init_buffer(q_co1, 1, 16 * 16 * 4)
    if bug in ("zero_c_first", "zero_c_first_twin"):
        zeros_to(pipe, c, m * n)  # c starts at zero...
        if bug == "zero_c_first_twin":
            ns.pipe_barrier(ns.Pipe.ALL)  # ...and that copy is done before fixpipe writes c
    c_l0 = q_co1.alloc_tensor(ns.float32)
    for kk in range(0, k, base_k):
        tk = min(base_k, k - kk)
        a_l1 = q_a1.alloc_tensor(ns.float16)
        ns.data_copy(a_l1, a[kk:], ns.Nd2NzParams(n_value=m, d_value=tk, src_d_value=k))
        q_a1.enque(a_l1)
        b_l1 = q_b1.alloc_tensor(ns.float16)
        ns.data_copy(b_l1, b[kk * n:], ns.Nd2NzParams(n_value=tk, d_value=n))
        q_b1.enque(b_l1)
        a_l1, b_l1 = q_a1.deque(), q_b1.deque()
        a_l0 = q_a2.alloc_tensor(ns.float16)
        ns.load_data(a_l0, a_l1, ns.LoadData2DParams(repeat_times=-(-tk // 16)))
        q_a2.enque(a_l0)
        b_l0 = q_b2.alloc_tensor(ns.float16)
        ns.load_data(b_l0, b_l1, ns.LoadData2DParams(repeat_times=-(-tk // 16), if_transpose=True))
        q_b2.enque(b_l0)
        q_a1.free_tensor(a_l1)
        q_b1.free_tensor(b_l1)
        a_l0, b_l0 = q_a2.deque(), q_b2.deque()
        first = (kk == 0) if bug != "first_step_accumulates" else False
        ns.mmad(c_l0, a_l0, b_l0, ns.MmadParams(m, n, tk, cmatrix_init_val=first))  # BUG: first_step_accumulates
        q_a2.free_tensor(a_l0)
        q_b2.free_tensor(b_l0)
    q_co1.enque(c_l0)
    c_l0 = q_co1.deque()
    if bug == "vector_reads_l0c":
        pipe.init_buffer(out := ns.TBuf(P.VECOUT), 16 * 16 * 4)
        ns.relu(out.get(ns.float32), c_l0, 256)  # BUG: vector_reads_l0c
    if k == 0 and bug == "zeros_when_k_is_0":  # no K step wrote L0C: the product is zero
        zeros_to(pipe, c, m * n)
    else:
        ns.fixpipe(c, c_l0, ns.FixpipeParams(m, n, relu=bug == "relu_in_fixpipe"))  # BUG: k_zero
    q_co1.free_tensor(c_l0)


def zeros_to(pipe, c, count):
    """``count`` float32 zeros to GM through UB (duplicate on V, then MTE3)."""
    zeros = ns.TBuf(P.VECOUT)
    pipe.init_buffer(zeros, count * 4)
    ns.duplicate(zeros.get(ns.float32), 0.0, count)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy(c, zeros.get(ns.float32), count)


@ns.kernel
def a_strips(a, c, m, k, rows_in_buffer):
    """A (m x k, m > 16) to L1 as 16-row NZ strips: a full strip, then the tail strip after it."""
    pipe = ns.TPipe()
    q_a1 = ns.TQue(P.A1)
    pipe.init_buffer(q_a1, 1, rows_in_buffer * k * 2)
    a_l1 = q_a1.alloc_tensor(ns.float16)
    ns.data_copy(a_l1, a, ns.Nd2NzParams(n_value=16, d_value=k))
    tail = a_l1[16 * k:]
    ns.data_copy(tail, a[16 * k:], ns.Nd2NzParams(n_value=m - 16, d_value=k))  # BUG: unpadded_rows
    q_a1.enque(a_l1)
    q_a1.free_tensor(q_a1.deque())


@ns.kernel
def copy_pad_to_l1(a, k, bug):
    pipe = ns.TPipe()
    q_a1 = ns.TQue(P.A1)
    pipe.init_buffer(q_a1, 1, 16 * k * 2)
    a_l1 = q_a1.alloc_tensor(ns.float16)
    if bug:
        ns.data_copy_pad(a_l1, a, 16 * k)  # BUG: copy_pad_to_l1
    else:
        ns.data_copy(a_l1, a, ns.Nd2NzParams(n_value=16, d_value=k))
    q_a1.enque(a_l1)
    q_a1.free_tensor(q_a1.deque())


@ns.kernel
def load_unfilled_l1(a, bug):
    pipe = ns.TPipe()
    b1, b2 = ns.TBuf(P.A1), ns.TBuf(P.A2)
    pipe.init_buffer(b1, 512)
    pipe.init_buffer(b2, 512)
    if bug != "l1_never_filled":
        ns.data_copy(b1.get(ns.float16), a, ns.Nd2NzParams(n_value=16, d_value=16))
        ns.set_flag(H.MTE2_MTE1, 0)
        ns.wait_flag(H.MTE2_MTE1, 0)
    ns.load_data(b2.get(ns.float16), b1.get(ns.float16), ns.LoadData2DParams())  # BUG: l1_never_filled


# ---------------------------------------------------------------------------------------------------------
# several blocks
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def block_sums(x, y, per_block, bug):
    """Each block sums its part of x and adds it to 8 elements of y: the same 8 for every block (a race: a
    reduction across blocks), 8 that overlap the next block's (a race: overlapping parts) or its own 8."""
    b = ns.get_block_idx()
    pipe = ns.TPipe()
    q_x = ns.TQue(P.VECIN)
    part, acc, tmp = ns.TBuf(), ns.TBuf(), ns.TBuf()
    pipe.init_buffer(q_x, 1, per_block * 4)
    for t in (part, acc, tmp):
        pipe.init_buffer(t, 64)
    x_local = q_x.alloc_tensor(ns.float32)
    ns.data_copy(x_local, x[b * per_block:], per_block)
    q_x.enque(x_local)
    x_local = q_x.deque()
    ns.duplicate(part.get(ns.float32), 0.0, 8)
    ns.reduce_sum(part.get(ns.float32), x_local, tmp.get(ns.float32), per_block)
    q_x.free_tensor(x_local)
    out = {"cross_block_sum": y, "overlapping_parts": y[b * 4:]}.get(bug, y[b * 8:])
    ns.data_copy(acc.get(ns.float32), out, 8)  # BUG: cross_block_sum
    ns.set_flag(H.MTE2_V, 0)
    ns.wait_flag(H.MTE2_V, 0)
    ns.add(acc.get(ns.float32), acc.get(ns.float32), part.get(ns.float32), 8)
    ns.set_flag(H.V_MTE3, 0)
    ns.wait_flag(H.V_MTE3, 0)
    ns.data_copy(out, acc.get(ns.float32), 8)  # BUG: cross-block write


# ---------------------------------------------------------------------------------------------------------
# the classes that were already caught (no regression): capacity, alignment, state, queue, sync, dtype
# ---------------------------------------------------------------------------------------------------------
@ns.kernel
def classic_mistakes(x, y, bug):
    pipe = ns.TPipe()
    q_in = ns.TQue(P.VECIN)
    pipe.init_buffer(q_in, 1, 2048)
    if bug == "ub_overflow":
        big = ns.TBuf()
        pipe.init_buffer(big, 256 * 1024)  # BUG: ub_overflow
    t = q_in.alloc_tensor(ns.float16)
    ns.data_copy(t, x, 40 if bug == "copy_not_32b" else 1024)  # BUG: copy_not_32b
    q_in.enque(t)
    t = q_in.deque()
    if bug == "alloc_twice":
        q_in.alloc_tensor(ns.float16)  # BUG: alloc_twice
    q_in.free_tensor(t)
    if bug == "use_after_free":
        ns.adds(t, t, 1.0, 1024)  # BUG: use_after_free
    if bug == "wait_without_set":
        ns.wait_flag(H.V_MTE3, 0)  # BUG: wait_without_set


@ns.kernel
def cube_types(a, b):
    """One 16 x 16 x 16 mmad of a and b's dtype (on 'classic': float16 yes, float32 no)."""
    pipe = ns.TPipe()
    a1, b1, a2, b2, co1 = ns.TBuf(P.A1), ns.TBuf(P.B1), ns.TBuf(P.A2), ns.TBuf(P.B2), ns.TBuf(P.CO1)
    for t in (a1, b1, a2, b2, co1):
        pipe.init_buffer(t, 1024)
    dt = a.dtype
    ns.data_copy(a1.get(dt), a, ns.Nd2NzParams(n_value=16, d_value=16))
    ns.data_copy(b1.get(dt), b, ns.Nd2NzParams(n_value=16, d_value=16))
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    frac = 512 // dt.itemsize
    ns.load_data(a2.get(dt), a1.get(dt), ns.LoadData2DParams(repeat_times=256 // frac))
    ns.load_data(b2.get(dt), b1.get(dt), ns.LoadData2DParams(repeat_times=256 // frac))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    ns.mmad(co1.get(ns.float32), a2.get(dt), b2.get(dt), m=16, n=16, k=16)  # BUG: fp32_on_classic


# ---------------------------------------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str                 # also the ``# BUG: <name>`` marker of the reported line
    run: Callable             # run(bug: bool, sanitize: str) -> LaunchResult
    error: type               # the class the bug is reported as
    names: tuple[str, ...]    # the buffer/tensor/queue names the message must contain
    hint: str                 # a keyword of the right hint
    not_in_hint: tuple[str, ...] = ()   # words of a wrong hint
    facts: dict = field(default_factory=dict)
    check_twin: Callable | None = None  # (twin result) -> None: the twin's output is right
    marker: str = ""          # the marker, when several cases share one reported line
    also_at: str = ""         # a second marker the report may name instead: between blocks, which of the two
                              # accesses is detected depends on their order in simulated time


def _vec(bug, twin, dtype_y=np.float16):
    def run(is_bug, sanitize):
        n = 1024
        return ns.launch(add_kernel, 1, f16(n), f16(n, 1.0).astype(dtype_y), np.zeros(n, np.float16), 256,
                         bug if is_bug else twin, sanitize=sanitize)
    return run


def _check_add(res):
    n = 1024
    np.testing.assert_array_equal(res["z"], (f16(n).astype(np.float32) + f16(n, 1.0)).astype(res["z"].dtype))


def _mm(bug, twin, m=16, n=16, k=64, base_k=32):
    def run(is_bug, sanitize):
        rng = np.random.default_rng(0)
        a = rng.integers(-3, 4, (m, max(k, 1))).astype(np.float16)[:, :k].copy()
        b = rng.integers(-3, 4, (max(k, 1), n)).astype(np.float16)[:k].copy()
        res = ns.launch(matmul_k, 1, a, b, np.full((m, n), 7, np.float32), m, n, k, base_k,
                        bug if is_bug else twin, sanitize=sanitize)
        res.expected = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0 if twin == "relu_in_fixpipe"
                                  else -np.inf)
        return res
    return run


def _check_mm(res):
    np.testing.assert_array_equal(res["c"], res.expected)


def _copy(bug):
    def run(is_bug, sanitize):
        x = f16(1024)
        return ns.launch(copy_through, 1, x, np.zeros(1024, np.float16), 256, bug if is_bug else "",
                         sanitize=sanitize)
    return run


CASES = [
    # --- reads of memory nothing wrote --------------------------------------------------------------
    Case("y_never_copied", _vec("y_never_copied", ""), ns.UninitializedReadError, ("UB", "'in_y'"), "data_copy",
         facts={"memory": "UB", "op": "add"}, check_twin=_check_add),
    Case("int32_never_copied",
         lambda bug, s: ns.launch(minus_one, 1, np.arange(64, dtype=np.int32), np.zeros(64, np.int32),
                                  "int32_never_copied" if bug else "", sanitize=s),
         ns.UninitializedReadError, ("'q_x'",), "data_copy", facts={"op": "adds"},
         check_twin=lambda r: np.testing.assert_array_equal(r["z"], np.arange(64) - 1)),
    Case("z_never_computed", _vec("z_never_computed", ""), ns.UninitializedReadError, ("'out_z'",), "compute into",
         facts={"op": "data_copy"}, check_twin=_check_add),
    Case("first_step_accumulates", _mm("first_step_accumulates", ""), ns.UninitializedReadError, ("L0C", "'q_co1'"),
         "cmatrix_init_val=", facts={"memory": "L0C", "op": "mmad"}, check_twin=_check_mm),
    Case("k_zero", _mm("", "zeros_when_k_is_0", k=0), ns.UninitializedReadError, ("L0C", "'q_co1'"), "K = 0",
         facts={"memory": "L0C", "op": "fixpipe"}, check_twin=_check_mm),
    Case("l1_never_filled",
         lambda bug, s: ns.launch(load_unfilled_l1, 1, f16(256), "l1_never_filled" if bug else "", sanitize=s),
         ns.UninitializedReadError, ("L1", "'b1'"), "copy the data into L1", facts={"op": "load_data"}),
    # --- negative GM slices, slices past the end ------------------------------------------------------
    Case("negative_offset",
         lambda bug, s: ns.launch(shifted_tiles, 1, f16(1024), np.zeros(1024, np.float16), 256,
                                  "negative_offset" if bug else "", sanitize=s),
         ns.OutOfBoundsError, ("x[-256:]", "[-256, 1024)", "1024 elements"), "max(0",
         not_in_hint=("past the end",), facts={"range": (-256, 1024), "size": 1024}),
    Case("negative_index",
         lambda bug, s: ns.launch(shifted_tiles, 1, f16(1024), np.zeros(1024, np.float16), 256,
                                  "negative_index" if bug else "", sanitize=s),
         ns.OutOfBoundsError, ("x[-100:]", "[-100, 1024)"), "len(x) - k", facts={"range": (-100, 1024)},
         marker="negative_offset"),
    Case("past_the_end", lambda bug, s: ns.launch(last_tile, 1, f16(1008), 256, not bug, sanitize=s),
         ns.OutOfBoundsError, ("'x'", "[768, 1024)", "16 element(s) past the end"), "min(tile, total - offset)"),
    # --- usage errors: site, names and a hint -------------------------------------------------------
    Case("no_init_buffer", _vec("no_init_buffer", ""), ns.UsageError, ("'out_z' (VECOUT)",), "init_buffer(out_z",
         check_twin=_check_add),
    Case("copy_pad_to_l1",
         lambda bug, s: ns.launch(copy_pad_to_l1, 1, f16(512), 32, bug, sanitize=s),
         ns.UsageError, ("GM -> L1", "a_l1", "'q_a1'"), "Nd2NzParams"),
    Case("vector_reads_l0c", _mm("vector_reads_l0c", "relu_in_fixpipe"), ns.UsageError, ("c_l0", "'q_co1'", "L0C"),
         "fixpipe", check_twin=_check_mm),
    Case("mixed_dtypes", _vec("mixed_dtypes", "mixed_dtypes_twin", dtype_y=np.float32), ns.UsageError,
         ("z_local", "y_local", "'in_y'", "float16", "float32"), "cast(", check_twin=_check_add),
    Case("fp32_gm_into_fp16",
         lambda bug, s: ns.launch(add_kernel, 1, f16(1024).astype(np.float32), f16(1024, 1.0),
                                  np.zeros(1024, np.float16), 256, "fp32_gm_into_fp16" if bug else "cast_x",
                                  sanitize=s),
         ns.UsageError, ("GM 'x' (float32)", "x_local", "'in_x'"), "as float32", check_twin=_check_add),
    # --- hints that are right -------------------------------------------------------------------------
    Case("zero_c_first", _mm("zero_c_first", "zero_c_first_twin"), ns.RaceError, ("GM 'c'",), "pipe_barrier",
         not_in_hint=("MTE3_FIX",), facts={"kind": "WAW"}, check_twin=_check_mm, marker="k_zero"),
    Case("vecout_for_copy", _copy("vecout_for_copy"), ns.RaceError, ("'q'", "VECOUT"),
         "TQueBind(TPosition.VECIN, TPosition.VECOUT)", not_in_hint=("enque after writing",),
         check_twin=lambda r: np.testing.assert_array_equal(r["y"], f16(1024))),
    Case("compute_on_bind",
         lambda bug, s: _copy("compute_on_bind")(True, s) if bug else
         ns.launch(double_it, 1, f16(1024), np.zeros(1024, np.float16), 256, sanitize=s),
         ns.RaceError, ("'q'",), "TQue(TPosition.VECIN)", not_in_hint=("enque after writing",),
         check_twin=lambda r: np.testing.assert_array_equal(r["y"], f16(1024) * 2)),
    Case("unpadded_rows",
         lambda bug, s: ns.launch(a_strips, 1, f16(20 * 32).reshape(20, 32), np.zeros(1, np.float16), 20, 32,
                                  20 if bug else 32, sanitize=s),
         ns.OutOfBoundsError, ("'q_a1'", "a buffer of 640 elements", "128 elements"), "16 x C0 fractals"),
    Case("cross_block_sum",
         lambda bug, s: ns.launch(block_sums, 4, np.ones(4 * 64, np.float32), np.zeros(32, np.float32), 64,
                                  "cross_block_sum" if bug else "", sanitize=s),
         ns.RaceError, ("GM 'y'",), "partial result per block", not_in_hint=("own part",),
         check_twin=lambda r: np.testing.assert_array_equal(r["y"], np.tile([64.0, 0, 0, 0, 0, 0, 0, 0], 4)),
         also_at="cross-block write"),
    Case("overlapping_parts",
         lambda bug, s: ns.launch(block_sums, 4, np.ones(4 * 64, np.float32), np.zeros(32, np.float32), 64,
                                  "overlapping_parts" if bug else "", sanitize=s),
         ns.RaceError, ("GM 'y'", "bytes [0x10, 0x20)"), "own part", not_in_hint=("reduction",),
         marker="cross_block_sum", also_at="cross-block write"),
    Case("missing_war_wait",
         lambda bug, s: ns.launch(ping_pong, 1, f16(2048), np.zeros(2048, np.float16), 256,
                                  "missing_war_wait" if bug else "", sanitize=s),
         ns.RaceError, ("VECCALC buffer 'buf'",), "HardEvent MTE3_MTE2", facts={"kind": "WAR"},
         check_twin=lambda r: np.testing.assert_array_equal(r["y"], f16(2048) * 2)),
    # --- the classes caught before (regressions) -----------------------------------------------------
    Case("ub_overflow", lambda bug, s: ns.launch(classic_mistakes, 1, f16(1024), None, "ub_overflow" if bug else "",
                                                 sanitize=s), ns.CapacityError, ("'big'", "'q_in'"), "smaller"),
    Case("copy_not_32b", lambda bug, s: ns.launch(classic_mistakes, 1, f16(1024), None,
                                                  "copy_not_32b" if bug else "", sanitize=s),
         ns.AlignmentError, ("40 float16",), "data_copy_pad"),
    Case("alloc_twice", lambda bug, s: ns.launch(classic_mistakes, 1, f16(1024), None, "alloc_twice" if bug else "",
                                                 sanitize=s), ns.QueueError, ("'q_in'",), "free_tensor"),
    Case("use_after_free", lambda bug, s: ns.launch(classic_mistakes, 1, f16(1024), None,
                                                    "use_after_free" if bug else "", sanitize=s),
         ns.TensorStateError, ("'q_in'",), "alloc_tensor"),
    Case("wait_without_set", lambda bug, s: ns.launch(classic_mistakes, 1, f16(1024), None,
                                                      "wait_without_set" if bug else "", sanitize=s),
         ns.SyncError, ("V_MTE3",), "set_flag(V_MTE3, 0)"),
    Case("fp32_on_classic",
         lambda bug, s: ns.launch(cube_types, 1, *[np.ones((16, 16), np.float32 if bug else np.float16)] * 2,
                                  config="classic", sanitize=s),
         ns.DtypeError, ("float32", "'classic'"), "cast the inputs to float16"),
]
IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_bug_is_reported_with_class_names_site_and_hint(case):
    with pytest.raises(case.error) as e:
        case.run(True, "error")
    err = e.value
    msg = str(err)
    assert type(err) is case.error, f"{type(err).__name__}: {msg}"
    for name in case.names:
        assert name in msg, f"{name!r} not in:\n{msg}"
    assert err.where in {site(case.marker or case.name), *([site(case.also_at)] if case.also_at else [])}, msg
    assert f"\n  at {err.where}" in msg
    assert err.hint and f"\n  hint: {err.hint}" in msg
    assert case.hint in err.hint, f"{case.hint!r} not in hint: {err.hint}"
    for wrong in case.not_in_hint:
        assert wrong not in err.hint, err.hint
    for k, v in case.facts.items():
        assert err.facts[k] == v, (k, err.facts)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_twin_runs_clean(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a SanitizerWarning would be a false positive
        res = case.run(False, "error")
    if case.check_twin:
        case.check_twin(res)


@pytest.mark.parametrize("case", [c for c in CASES if getattr(c.error, "recoverable", False)], ids=lambda c: c.name)
def test_warn_mode_reports_the_bug_and_finishes(case):
    with pytest.warns(ns.SanitizerWarning) as w:
        case.run(True, "warn")
    first = [str(r.message) for r in w if issubclass(r.category, ns.SanitizerWarning)][0]
    assert first.startswith(case.error.__name__ + ":") and site(case.marker or case.name) in first


@pytest.mark.parametrize("kernel", [ping_pong_prefetch, tail_add_one], ids=["ping_pong_prefetch", "tail"])
def test_more_correct_kernels_run_clean(kernel):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if kernel is tail_add_one:
            x = f16(40)
            res = ns.launch(tail_add_one, 1, x, np.zeros(40, np.float16), 40)
            np.testing.assert_array_equal(res["y"], x + np.float16(1))
        else:
            x = f16(2048)
            res = ns.launch(ping_pong_prefetch, 1, x, np.zeros(2048, np.float16), 256)
            np.testing.assert_array_equal(res["y"], x + np.float16(1))


def test_nd2nz_and_load_data_padding_count_as_written():
    """m = 5 rows and k = 24 columns: Nd2Nz pads to 16 rows and 32 columns, load_data moves whole fractals
    that are partly padding, mmad reads whole fractals; none of it is an uninitialised read."""
    res = _mm("", "", m=5, n=16, k=24, base_k=24)(False, "error")
    _check_mm(res)


def test_host_float64_array_is_a_simulator_error_naming_the_argument():
    with pytest.raises(ns.DtypeError) as e:
        ns.launch(add_kernel, 1, np.arange(1024.0), f16(1024), np.zeros(1024, np.float16), 256, "")
    msg = str(e.value)
    assert msg.startswith("x: float64 is not supported; use float16, bfloat16, float32, int8, uint8, int16 or "
                          "int32")
    assert "x.astype(np.float32)" in e.value.hint and e.value.facts["argument"] == "x"
    assert isinstance(e.value, ns.NpuSimError) and isinstance(e.value, TypeError)
    # the course's checks tell it from the learner's own bug
    with pytest.raises(CheckFailed, match=r"the simulator stopped your code with DtypeError:\nx: float64"):
        call_learner("c", ns.launch, add_kernel, 1, np.arange(1024.0), f16(1024), np.zeros(1024, np.float16),
                     256, "")


def test_every_hint_of_a_missing_sync_names_an_event_that_exists():
    """The pipe pairs of the race hints: a HardEvent exactly when Ascend C defines one."""
    from npusim.sanitizer import sync_for

    events = {e.value for e in ns.HardEvent}
    for a in PIPES:
        for b in PIPES:
            text = sync_for(a, b)
            named = re.findall(r"HardEvent ([A-Z0-9]+_[A-Z0-9]+)", text)
            if (a, b) in events:
                assert named == [f"{a.name}_{b.name}"] and ns.HardEvent[named[0]]
            else:
                assert not named and "pipe_barrier(Pipe.ALL)" in text
