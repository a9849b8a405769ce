"""``Matmul<MatmulType<...>, ...>`` as a Python object: the high-level Cube API of ``lib/matmul_intf.h``.

The object runs the usual data path with npusim's instructions, one base block (``baseM x baseN`` of the
tiling) at a time: A and B tiles GM -> L1 (ND -> NZ, MTE2), L1 -> L0A/L0B (MTE1), Mmad over the K steps
into L0C (M), Fixpipe to GM (FIX). Queues between the stages double-buffer them. Differences from CANN's
implementation (its scheduling is not public): one base block per step (no stepM/stepN groups, no A kept
in L1 across N), A and B in ND only, no transposes, results to GM only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

import npusim as ns

from ..kernels.matmul import copy_strips, split
from ..tensor import GlobalTensor
from .tiling import TCubeTiling


class CubeFormat(Enum):
    """Layout of a Matmul operand in GM: ND (row-major) or NZ (fractals)."""

    ND = "ND"
    NZ = "NZ"


@dataclass(frozen=True)
class MatmulType:
    """``MatmulType<TPosition, CubeFormat, T[, isTrans]>``."""

    position: object
    format: CubeFormat
    dtype: object
    is_trans: bool = False


class Matmul:
    """``Matmul<A, B, C[, BIAS]>``: register it with :func:`regist_matmul_obj`, give the operands, then
    ``iterate_all(c)`` or ``while mm.iterate(): mm.get_tensor_c(c)``, then ``end()``."""

    def __init__(self, a_type: MatmulType, b_type: MatmulType, c_type: MatmulType,
                 bias_type: MatmulType | None = None):
        for t, what in ((a_type, "A"), (b_type, "B"), (c_type, "C")):
            if not isinstance(t, MatmulType):
                raise ns.UsageError(f"Matmul: the {what} type must be a MatmulType, not {t!r}",
                                    hint="Matmul(MatmulType(TPosition.GM, CubeFormat.ND, ns.float16), ...)")
            if t.format is not CubeFormat.ND or t.is_trans:
                raise ns.UsageError(f"Matmul: npusim's Matmul takes ND, untransposed operands ({what}: {t})",
                                    hint="pass A as M x K and B as K x N row-major matrices in GM")
        self.a_type, self.b_type, self.c_type, self.bias_type = a_type, b_type, c_type, bias_type
        self.tiling: TCubeTiling | None = None
        self.a = self.b = self.bias = None
        self._blocks = None

    # --- setup ------------------------------------------------------------------------------------------
    def init(self, tiling: TCubeTiling, pipe: ns.TPipe) -> None:
        """What REGIST_MATMUL_OBJ does: keep the tiling and reserve the buffers of one base block."""
        t = self.tiling = tiling
        if min(t.baseM, t.baseN, t.baseK) < 1:
            raise ns.UsageError(f"Matmul: the tiling has no base block ({t.baseM} x {t.baseN} x {t.baseK})",
                                hint="fill it on the host with MultiCoreMatmulTiling.get_tiling(tiling)")
        dt = np.dtype(self.a_type.dtype)
        k0 = 32 // dt.itemsize
        bm, bn, bk = -(-t.baseM // 16) * 16, -(-t.baseN // 16) * 16, -(-t.baseK // k0) * k0
        self.q_a1, self.q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
        self.q_a2, self.q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
        self.q_co1 = ns.TQue(ns.TPosition.CO1)
        pipe.init_buffer(self.q_a1, 2, bm * bk * dt.itemsize)
        pipe.init_buffer(self.q_b1, 2, bk * bn * dt.itemsize)
        pipe.init_buffer(self.q_a2, 2, bm * bk * dt.itemsize)
        pipe.init_buffer(self.q_b2, 2, bk * bn * dt.itemsize)
        pipe.init_buffer(self.q_co1, 2, bm * bn * 4)
        self.bias_buf = None
        if t.isBias or self.bias_type is not None:
            self.bias_buf = ns.TBuf(ns.TPosition.B1)   # read by Mmad: a flag orders MTE2 -> M
            pipe.init_buffer(self.bias_buf, bn * 4)
        self.m, self.n, self.ka = t.M, t.N, t.Ka
        self.tail_m, self.tail_n = t.singleCoreM, t.singleCoreN

    def set_org_shape(self, m: int, n: int, ka: int, kb: int | None = None) -> None:
        """SetOrgShape: the whole matrices' M, N, K (row lengths of A, B and C in GM)."""
        self.m, self.n, self.ka = m, n, ka

    def set_tensor_a(self, gm, is_trans: bool = False) -> None:
        if is_trans:
            raise ns.UsageError("set_tensor_a: a transposed A is not modelled", hint="pass A as M x K")
        self.a = gm

    def set_tensor_b(self, gm, is_trans: bool = False) -> None:
        if is_trans:
            raise ns.UsageError("set_tensor_b: a transposed B is not modelled", hint="pass B as K x N")
        self.b = gm

    def set_bias(self, gm) -> None:
        """SetBias: a float32 row of N values added to every row of C."""
        if self.bias_buf is None:
            raise ns.UsageError("set_bias on a Matmul whose tiling has no bias",
                                hint="tiling_api.set_bias(True) on the host (isBias = 1), or a BIAS MatmulType")
        self.bias = gm

    def set_tail(self, tail_m: int = -1, tail_n: int = -1, tail_k: int = -1) -> None:
        """SetTail: this core's region is ``tail_m x tail_n`` (the last cores' regions are smaller)."""
        if tail_m > 0:
            self.tail_m = tail_m
        if tail_n > 0:
            self.tail_n = tail_n

    # --- compute ------------------------------------------------------------------------------------------
    def _check_ready(self, what: str) -> None:
        if self.tiling is None:
            raise ns.UsageError(f"{what} before regist_matmul_obj", hint="regist_matmul_obj(pipe, None, mm, tiling)")
        if self.a is None or self.b is None:
            raise ns.UsageError(f"{what} before set_tensor_a/set_tensor_b",
                                hint="give both operands first: mm.set_tensor_a(gm_a); mm.set_tensor_b(gm_b)")

    def _block_list(self):
        t = self.tiling
        return [(i0, j0, min(t.baseM, self.tail_m - i0), min(t.baseN, self.tail_n - j0))
                for i0 in range(0, self.tail_m, t.baseM) for j0 in range(0, self.tail_n, t.baseN)]

    def _compute(self, i0: int, j0: int, tm: int, tn: int):
        """One base block into an L0C accumulator (dequeued, ready to drain)."""
        t, dt = self.tiling, self.a.dtype
        k0 = 32 // dt.itemsize
        bias_l1 = None
        if self.bias is not None:
            bias_l1 = self.bias_buf.get(ns.float32)
            ns.data_copy(bias_l1, self.bias[j0:], -(-tn // 8) * 8)   # whole 32 B: N a multiple of 8
            ns.set_flag(ns.HardEvent.MTE2_M, 0)
            ns.wait_flag(ns.HardEvent.MTE2_M, 0)
        acc = self.q_co1.alloc_tensor(ns.float32 if dt != ns.int8 else ns.int32)
        for kk in range(0, self.ka, t.baseK):
            tk = min(t.baseK, self.ka - kk)
            m1, n1, k1 = -(-tm // 16), -(-tn // 16), -(-tk // k0)
            a_l1 = self.q_a1.alloc_tensor(dt)
            copy_strips(a_l1, self.a[i0 * self.ka + kk:], tm, tk, self.ka)
            self.q_a1.enque(a_l1)
            b_l1 = self.q_b1.alloc_tensor(dt)
            copy_strips(b_l1, self.b[kk * self.n + j0:], tk, tn, self.n)
            self.q_b1.enque(b_l1)
            a_l1, b_l1 = self.q_a1.deque(), self.q_b1.deque()
            a_l0, b_l0 = self.q_a2.alloc_tensor(dt), self.q_b2.alloc_tensor(dt)
            split(a_l0, a_l1, m1, k1, 0, k1)
            split(b_l0, b_l1, k1, n1, 0, n1, transpose=True)
            self.q_a1.free_tensor(a_l1)
            self.q_b1.free_tensor(b_l1)
            self.q_a2.enque(a_l0)
            self.q_b2.enque(b_l0)
            a_l0, b_l0 = self.q_a2.deque(), self.q_b2.deque()
            if kk == 0 and bias_l1 is not None:
                ns.mmad(acc, a_l0, b_l0, bias_l1, ns.MmadParams(tm, tn, tk))
                ns.set_flag(ns.HardEvent.M_MTE2, 0)    # the next block's bias may overwrite it after this
                ns.wait_flag(ns.HardEvent.M_MTE2, 0)
            else:
                ns.mmad(acc, a_l0, b_l0, ns.MmadParams(tm, tn, tk, 0, False, kk == 0))
            self.q_a2.free_tensor(a_l0)
            self.q_b2.free_tensor(b_l0)
        self.q_co1.enque(acc)
        return self.q_co1.deque()

    def _drain(self, acc, c, i0: int, j0: int, tm: int, tn: int) -> None:
        if not isinstance(c, GlobalTensor):
            raise ns.UsageError("get_tensor_c/iterate_all write to GM here (a UB destination is not modelled)",
                                hint="pass the GlobalTensor of C (its block lands at its place in C)")
        ns.fixpipe(c[i0 * self.n + j0:], acc, ns.FixpipeParamsV220(tn, tm, -(-tm // 16) * 16, self.n))
        self.q_co1.free_tensor(acc)

    def iterate_all(self, c, en_atomic: int = 0) -> None:
        """IterateAll: compute this core's whole region of C and write it to ``c`` (GM)."""
        self._check_ready("iterate_all")
        for i0, j0, tm, tn in self._block_list():
            self._drain(self._compute(i0, j0, tm, tn), c, i0, j0, tm, tn)

    def iterate(self) -> bool:
        """Iterate: compute the next base block into L0C; False when the region is done."""
        self._check_ready("iterate")
        if self._blocks is None:
            self._blocks = iter(self._block_list())
            self._current = None
        if self._current is not None:
            raise ns.UsageError("iterate again before get_tensor_c drained the last block",
                                hint="while mm.iterate(): mm.get_tensor_c(c)")
        nxt = next(self._blocks, None)
        if nxt is None:
            self._blocks = None
            return False
        self._current = (self._compute(*nxt), nxt)
        return True

    def get_tensor_c(self, c, en_atomic: int = 0) -> None:
        """GetTensorC: write the block of the last iterate to its place in ``c``."""
        if getattr(self, "_current", None) is None:
            raise ns.UsageError("get_tensor_c without an iterate before it", hint="while mm.iterate(): mm.get_tensor_c(c)")
        acc, (i0, j0, tm, tn) = self._current
        self._current = None
        self._drain(acc, c, i0, j0, tm, tn)

    def end(self) -> None:
        """End: nothing is left in flight (the queues' buffers are all free)."""


def regist_matmul_obj(pipe: ns.TPipe, workspace, mm: Matmul, tiling: TCubeTiling) -> None:
    """REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling): bind the tiling and reserve the buffers."""
    if not isinstance(mm, Matmul):
        raise ns.UsageError(f"regist_matmul_obj needs a Matmul, not {mm!r}", hint="mm = Matmul(MatmulType(...), ...)")
    mm.init(tiling, pipe)
