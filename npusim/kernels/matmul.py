"""Tiled matmul on the Cube: C (M x N) = A (M x K) @ B (K x N).

The data path of every Cube kernel on A2:

    GM (ND) --MTE2, ND->NZ--> L1 (A1/B1) --MTE1 load_data--> L0A (ZZ) / L0B (ZN) --M mmad--> L0C (NZ)
           --FIX fixpipe, NZ->ND + cast--> GM

Each output tile of ``base_m x base_n`` accumulates ``K / base_k`` partial products in L0C before one
fixpipe drains it. Blocks take output tiles round-robin. Queues double-buffer every stage.
On the ``classic`` preset (no Fixpipe) the tile goes L0C -> UB on the vector pipe, is cast there, and
leaves through MTE3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import npusim as ns


@dataclass(frozen=True)
class MatmulTiling:
    """Base block sizes (elements) and buffer counts of :func:`matmul`."""

    base_m: int = 64
    base_n: int = 64
    base_k: int = 64
    buffer_num: int = 2

    def check(self, cfg: ns.HardwareConfig, in_dtype, out_dtype) -> None:
        """Raise a CapacityError if the buffers do not fit L1/L0A/L0B/L0C (before launching)."""
        isz = np.dtype(in_dtype).itemsize
        k0 = 32 // isz
        m16, n16, kk = -(-self.base_m // 16) * 16, -(-self.base_n // 16) * 16, -(-self.base_k // k0) * k0
        need = {"L1": self.buffer_num * (m16 * kk + kk * n16) * isz, "L0A": self.buffer_num * m16 * kk * isz,
                "L0B": self.buffer_num * kk * n16 * isz, "L0C": self.buffer_num * m16 * n16 * 4}
        for mem, b in need.items():
            if b > cfg.memory_bytes(mem):
                raise ns.CapacityError(
                    f"matmul tiling {self.base_m}x{self.base_n}x{self.base_k} with {self.buffer_num} buffers "
                    f"needs {b} B of {mem}, which has {cfg.memory_bytes(mem)} B",
                    hint="use smaller base blocks or fewer buffers", memory=mem, requested=b)


@ns.kernel
def matmul(a, b, c, m: int, n: int, k: int, tiling: MatmulTiling = MatmulTiling(), *, b_packed: bool = False,
           deq_scale=None, acc_dtype: str | None = None, relu: bool = False) -> None:
    """``c[:m, :n] = relu?((a[:m, :k] @ B) [* deq_scale[col]])`` with ``a`` row-major ND in GM.

    ``b``: row-major ND (k x n) of a 16-bit type, its fractals transposed on the way to L0B; or, with
    ``b_packed=True``, ZN fractals ``(K1, N1, 16, K0)`` packed once on the host (as frameworks pack
    weights), which need no transpose, so every Cube type works: fp16/bf16/fp32 -> fp32, int8 -> int32,
    and fp16 -> fp16 where the preset allows it (``acc_dtype="float16"``, the FP16 lab).
    ``deq_scale``: one fp32 scale per output column (``n`` padded to a multiple of 16) for int8 results,
    applied by Fixpipe on the way to an fp16 ``c``; Fixpipe reads it from L1, so flags order its load.
    On the classic preset (no Fixpipe) results leave through UB, without ``relu``/``deq_scale``."""
    t = tiling
    cfg = ns.get_core_config()
    dt = a.dtype
    k0 = 32 // dt.itemsize
    acc = np.dtype(acc_dtype) if acc_dtype else (ns.int32 if dt == ns.int8 else ns.float32)
    if b_packed and (t.base_k % k0 or t.base_n % 16):
        raise ns.UsageError(f"a packed-weights tiling needs base_k a multiple of {k0} (K0 of {dt.name}) and "
                            f"base_n of 16, got {t}")
    if not b_packed and dt.itemsize != 2:
        raise ns.UsageError("an ND b is transposed per 16x16 fractal in load_data, which needs a 16-bit "
                            "dtype: pack b into ZN fractals (b_packed=True) for int8 or fp32")
    via_ub = not cfg.has_fixpipe
    if via_ub and (relu or deq_scale is not None):
        raise ns.UsageError(f"'{cfg.name}' has no Fixpipe: relu and deq_scale ride in it on the way out of L0C")
    bm16, bn16 = -(-t.base_m // 16) * 16, -(-t.base_n // 16) * 16
    bkk = -(-t.base_k // k0) * k0
    n1_total = -(-n // 16)  # fractal columns of a packed b
    pipe = ns.TPipe()
    q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
    q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
    q_co1 = ns.TQue(ns.TPosition.CO1)
    pipe.init_buffer(q_a1, t.buffer_num, bm16 * bkk * dt.itemsize)
    pipe.init_buffer(q_b1, t.buffer_num, bkk * bn16 * dt.itemsize)
    pipe.init_buffer(q_a2, t.buffer_num, bm16 * bkk * dt.itemsize)
    pipe.init_buffer(q_b2, t.buffer_num, bkk * bn16 * dt.itemsize)
    pipe.init_buffer(q_co1, t.buffer_num, bm16 * bn16 * acc.itemsize)
    if via_ub:  # classic: L0C -> UB (V) -> cast (V) -> GM (MTE3)
        q_ub = ns.TQue(ns.TPosition.VECIN)
        q_out = ns.TQue(ns.TPosition.VECOUT)
        pipe.init_buffer(q_ub, 1, bm16 * bn16 * acc.itemsize)
        pipe.init_buffer(q_out, 1, bm16 * bn16 * c.dtype.itemsize)
    if deq_scale is not None:
        scale_buf = ns.TBuf(ns.TPosition.A1)  # read by Fixpipe: no queue pairs MTE2 with FIX, so flags do it
        pipe.init_buffer(scale_buf, bn16 * 4)
    first = True

    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
    for tile in range(ns.get_block_idx(), tiles_m * tiles_n, ns.get_block_num()):
        i0, j0 = (tile // tiles_n) * t.base_m, (tile % tiles_n) * t.base_n
        tm, tn = min(t.base_m, m - i0), min(t.base_n, n - j0)
        m1, n1 = -(-tm // 16), -(-tn // 16)
        c_l0 = q_co1.alloc_tensor(acc)
        for kk in range(0, k, t.base_k):
            tk = min(t.base_k, k - kk)
            k1 = -(-tk // k0)
            # CopyIn: GM -> L1 on MTE2. A becomes 16-row NZ strips (converted on the way), which puts its
            # fractals in L0A's ZZ order; an ND B becomes strips along K the same way, a packed B is
            # already ZN: k1 rows of n1 fractals, each row contiguous in GM.
            a_l1 = q_a1.alloc_tensor(dt)
            copy_strips(a_l1, a[i0 * k + kk:], tm, tk, k)
            q_a1.enque(a_l1)
            b_l1 = q_b1.alloc_tensor(dt)
            if b_packed:
                ns.data_copy(b_l1, b[((kk // k0) * n1_total + j0 // 16) * 16 * k0:], ns.DataCopyParams(
                    block_count=k1, block_len=n1 * 16, src_stride=(n1_total - n1) * 16))
            else:
                copy_strips(b_l1, b[kk * n + j0:], tk, tn, n)
            q_b1.enque(b_l1)
            # Split: L1 -> L0A / L0B on MTE1, whole fractals in one instruction each (an ND B's fractals
            # are transposed into ZN on the way)
            a_l1, b_l1 = q_a1.deque(), q_b1.deque()
            a_l0 = q_a2.alloc_tensor(dt)
            ns.load_data(a_l0, a_l1, ns.LoadData2DParams(repeat_times=m1 * k1))
            q_a2.enque(a_l0)
            b_l0 = q_b2.alloc_tensor(dt)
            ns.load_data(b_l0, b_l1, ns.LoadData2DParams(repeat_times=k1 * n1, if_transpose=not b_packed))
            q_b2.enque(b_l0)
            q_a1.free_tensor(a_l1)
            q_b1.free_tensor(b_l1)
            # Compute: accumulate in L0C (M)
            a_l0, b_l0 = q_a2.deque(), q_b2.deque()
            ns.mmad(c_l0, a_l0, b_l0, ns.MmadParams(tm, tn, tk, cmatrix_init_val=(kk == 0)))
            q_a2.free_tensor(a_l0)
            q_b2.free_tensor(b_l0)
        scale = None
        if deq_scale is not None:
            scale = scale_buf.get(ns.float32)
            if not first:
                ns.wait_flag(ns.HardEvent.FIX_MTE2, 0)  # the previous Fixpipe has read the old scales
            ns.data_copy(scale, deq_scale[j0:], n1 * 16)
            ns.set_flag(ns.HardEvent.MTE2_FIX, 0)       # the new scales are in L1...
            ns.wait_flag(ns.HardEvent.MTE2_FIX, 0)      # ...before Fixpipe reads them
        q_co1.enque(c_l0)
        # CopyOut: L0C -> GM
        c_l0 = q_co1.deque()
        if via_ub:
            _drain_via_ub(c_l0, c, q_ub, q_out, i0, j0, tm, tn, n, m1, n1)
        else:
            ns.fixpipe(c[i0 * n + j0:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=n, relu=relu, deq_scale=scale))
        if deq_scale is not None:
            ns.set_flag(ns.HardEvent.FIX_MTE2, 0)
        first = False
        q_co1.free_tensor(c_l0)
    if deq_scale is not None and not first:
        ns.wait_flag(ns.HardEvent.FIX_MTE2, 0)


def copy_strips(dst, src, rows: int, cols: int, row_stride: int) -> None:
    """GM (ND, ``rows x cols`` of a matrix with ``row_stride``) -> L1 as consecutive 16-row NZ strips.

    Strip i holds rows 16i..16i+15 as ``ceil(cols / C0)`` fractals, so the fractals lie in row-of-fractals
    order, which is what L0A (ZZ) and, after a per-fractal transpose, L0B (ZN) expect. Full strips go in
    one ND->NZ instruction (``nd_num`` matrices); a last partial strip needs a second one (the hardware
    pads its missing rows with zeros in L1, and never reads past the matrix in GM).
    """
    full, tail = divmod(rows, 16)
    c0 = 32 // src.dtype.itemsize
    strip = -(-cols // c0) * c0 * 16  # elements of one strip in L1
    if full:
        ns.data_copy(dst, src, ns.Nd2NzParams(n_value=16, d_value=cols, src_d_value=row_stride, nd_num=full,
                                              src_nd_matrix_stride=16 * row_stride))
    if tail:
        ns.data_copy(dst[full * strip:], src[full * 16 * row_stride:],
                     ns.Nd2NzParams(n_value=tail, d_value=cols, src_d_value=row_stride))


def _drain_via_ub(c_l0, c, q_ub, q_out, i0, j0, tm, tn, n, m1, n1) -> None:
    """Coupled cores without Fixpipe: L0C -> UB (V), cast in UB (V), then NZ rows -> GM rows (MTE3)."""
    count = m1 * n1 * 256
    ub = q_ub.alloc_tensor(c_l0.dtype)
    ns.data_copy(ub, c_l0, count)
    q_ub.enque(ub)
    ub = q_ub.deque()
    out = q_out.alloc_tensor(c.dtype)
    if c.dtype != ub.dtype:
        ns.cast(out, ub, ns.RoundMode.CAST_RINT, count)
    else:
        ns.data_copy(out, ub, count)
    q_ub.free_tensor(ub)
    q_out.enque(out)
    out = q_out.deque()
    esz = c.dtype.itemsize
    for j in range(n1):  # each NZ column block holds 16 columns of every row: one 16-wide piece per row
        w = min(16, tn - j * 16)
        ub_gap = (16 * esz - -(-w * esz // 32) * 32) // 32  # UB rows are 16 elements apart
        ns.data_copy_pad(c[i0 * n + j0 + j * 16:], out[j * m1 * 256:], ns.DataCopyExtParams(
            block_count=tm, block_len=w * esz, src_stride=ub_gap, dst_stride=(n - w) * esz))
    q_out.free_tensor(out)


def run_matmul(a: np.ndarray, b: np.ndarray, *, out_dtype=np.float32, tiling: MatmulTiling = MatmulTiling(),
               block_dim: int = 1, config=None, sanitize: str = "error") -> ns.LaunchResult:
    """Launch :func:`matmul` on ``a @ b``; ``result["c"]`` is the product."""
    cfg = ns.get_config(config)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise ValueError(f"inner sizes differ: a is {a.shape}, b is {b.shape}")
    if a.dtype.itemsize != 2:
        raise ns.UsageError(f"run_matmul takes fp16 or bf16 inputs, not {a.dtype}: the kernel transposes B "
                            f"per 16x16 fractal in load_data, which needs a 16-bit type")
    tiling.check(cfg, a.dtype, out_dtype)
    c = np.zeros((m, n), dtype=out_dtype)
    return ns.launch(matmul, block_dim, np.ascontiguousarray(a), np.ascontiguousarray(b), c, m, n, k, tiling,
                     config=cfg, sanitize=sanitize)
