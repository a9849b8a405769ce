"""Tiled matmul on the Cube: C (M x N) = A (M x K) @ B (K x N), tiled as Ascend's Matmul does it.

The data path of every Cube kernel on A2:

    GM (ND) --MTE2, ND->NZ--> L1 (A1/B1) --MTE1 load_data--> L0A (ZZ) / L0B (ZN) --M mmad--> L0C (NZ)
           --FIX fixpipe, NZ->ND + cast--> GM

The sizes come from a :class:`~npusim.kernels.matmul_tiling.MatmulTiling` (the host tiling chooses them,
:func:`~npusim.kernels.matmul_tiling.choose_matmul_tiling`):

- each core takes its regions of C (the ``single_core`` grid, else output tiles round-robin) and walks
  them a group of ``step_n`` base blocks at a time, each base block accumulating in its own L0C buffer;
- one GM->L1 copy brings ``step_ka`` (A) or ``step_kb`` (B) K steps; each K step splits them into an
  L0A tile and ``step_n`` L0B tiles and runs ``step_n`` Mmads, so one A tile feeds several base blocks;
- with ``depth_a1`` buffers for every A tile of the K loop, A stays in L1 while the core walks along N;
- with ``stagger_k`` the cores sharing rows of A or columns of B start their K loops at different K;
- queues double-buffer every stage; the drain of one accumulator overlaps the Mmads of the next.

With the default tiling this is the simple kernel of lab 03: one base block per output tile, one K step
per copy. On the ``classic`` preset (no Fixpipe) a tile goes L0C -> UB on the vector pipe, is cast there,
and leaves through MTE3.
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from .matmul_tiling import MatmulTiling, choose_matmul_tiling

__all__ = ["MatmulTiling", "choose_matmul_tiling", "copy_strips", "matmul", "run_matmul"]


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
    ka_span, kb_span = t.step_ka * t.base_k, t.step_kb * t.base_k   # K covered by one A / B copy to L1
    ka_cols = -(-min(ka_span, k) // k0) * k0
    kb_rows = -(-min(kb_span, k) // (16 if not b_packed else k0)) * (16 if not b_packed else k0)
    gw16 = -(-(t.step_n * t.base_n) // 16) * 16
    resident = t.a_resident(k)
    pipe = ns.TPipe()
    q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
    q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
    q_co1 = ns.TQue(ns.TPosition.CO1)
    pipe.init_buffer(q_a1, t.a1, bm16 * ka_cols * dt.itemsize)
    pipe.init_buffer(q_b1, t.b1, kb_rows * gw16 * dt.itemsize)
    pipe.init_buffer(q_a2, t.buffer_num, bm16 * bkk * dt.itemsize)
    pipe.init_buffer(q_b2, t.buffer_num * t.step_n, bkk * bn16 * dt.itemsize)
    pipe.init_buffer(q_co1, t.l0c, bm16 * bn16 * acc.itemsize)
    drain = _Drain(pipe, cfg, c, n, bm16, bn16, acc, deq_scale, relu)
    n1_total = -(-n // 16)  # fractal columns of a packed b

    def load_a(i0, tm, kk):
        """CopyIn of A: ``tm`` rows x one copy's K from column ``kk``, as 16-row NZ strips (L0A's order)."""
        a_l1 = q_a1.alloc_tensor(dt)
        copy_strips(a_l1, a[i0 * k + kk:], tm, min(ka_span, k - kk), k)
        q_a1.enque(a_l1)
        return q_a1.deque()

    def load_b(kk, j0, gw):
        """CopyIn of B: one copy's K rows from ``kk`` x the group's ``gw`` columns from ``j0``, as k-row
        strips of fractals (L0B's order); a packed B is already in that order."""
        b_l1 = q_b1.alloc_tensor(dt)
        tk = min(kb_span, k - kk)
        if b_packed:
            k1, g1 = -(-tk // k0), -(-gw // 16)
            ns.data_copy(b_l1, b[((kk // k0) * n1_total + j0 // 16) * 16 * k0:], ns.DataCopyParams(
                block_count=k1, block_len=g1 * 16, src_stride=(n1_total - g1) * 16))
        else:
            copy_strips(b_l1, b[kk * n + j0:], tk, gw, n)
        q_b1.enque(b_l1)
        return q_b1.deque()

    panel: list = []   # the A tiles of one row of C, kept in L1 when they all fit (depth_a1)
    panel_row = None
    for i0, tm, j0, widths, place in my_groups(t, m, n):
        m1 = -(-tm // 16)
        if resident and panel_row != i0:
            for a_l1 in panel:
                q_a1.free_tensor(a_l1)
            panel, panel_row = [load_a(i0, tm, kk) for kk in range(0, k, ka_span)], i0
        gw = sum(widths)
        g1 = -(-gw // 16)
        accs = [q_co1.alloc_tensor(acc) for _ in widths]
        order = t.k_order(k, place)
        for kk in order:
            tk = min(t.base_k, k - kk)
            k1 = -(-tk // k0)
            if kk % ka_span == 0:
                a_l1 = panel[kk // ka_span] if resident else load_a(i0, tm, kk)
            if kk % kb_span == 0:
                b_l1 = load_b(kk, j0, gw)
            # Split: L1 -> L0A / L0B on MTE1 (an ND B's fractals are transposed into ZN on the way)
            a_l0 = q_a2.alloc_tensor(dt)
            split(a_l0, a_l1, m1, k1, (kk % ka_span) // k0, -(-min(ka_span, k - kk + kk % ka_span) // k0))
            q_a2.enque(a_l0)
            b_l0s, col = [], 0
            for tn in widths:
                n1 = -(-tn // 16)
                b_l0 = q_b2.alloc_tensor(dt)
                split(b_l0, b_l1, k1, n1, ((kk % kb_span) // k0) * g1 + col, g1, transpose=not b_packed)
                q_b2.enque(b_l0)
                b_l0s.append(b_l0)
                col += n1
            last_a, last_b = kk + t.base_k >= min(kk - kk % ka_span + ka_span, k), \
                kk + t.base_k >= min(kk - kk % kb_span + kb_span, k)
            if last_a and not resident:
                q_a1.free_tensor(a_l1)
            if last_b:
                q_b1.free_tensor(b_l1)
            # Compute: accumulate in L0C (M), one Mmad per base block of the group
            a_l0 = q_a2.deque()
            for acc_t, tn in zip(accs, widths):
                b_l0 = q_b2.deque()
                ns.mmad(acc_t, a_l0, b_l0, ns.MmadParams(tm, tn, tk, cmatrix_init_val=(kk == order[0])))
                q_b2.free_tensor(b_l0)
            q_a2.free_tensor(a_l0)
        # CopyOut: L0C -> GM, base block by base block
        col = j0
        for acc_t, tn in zip(accs, widths):
            q_co1.enque(acc_t)
            drain(q_co1, i0, col, tm, tn)
            col += tn
    for a_l1 in panel:
        q_a1.free_tensor(a_l1)
    drain.finish()


def my_groups(t: MatmulTiling, m: int, n: int):
    """This block's output tile groups, ``(row, rows, col, [columns of each base block], place)``: its
    regions of the single_core grid (every ``block_num``-th one), walked row by row, ``step_n`` base blocks
    at a time; ``place`` (grid row + column) staggers the K loop (``stagger_k``)."""
    out = []
    for r, (ri, rm, rj, rn, place) in enumerate(t.regions(m, n)):
        if r % ns.get_block_num() != ns.get_block_idx():
            continue
        for i0 in range(ri, ri + rm, t.base_m):
            for j0 in range(rj, rj + rn, t.base_n * t.step_n):
                widths = [min(t.base_n, rj + rn - j) for j in range(j0, min(j0 + t.base_n * t.step_n, rj + rn),
                                                                     t.base_n)]
                out.append((i0, min(t.base_m, ri + rm - i0), j0, widths, place))
    return out


def split(dst, src, rows: int, cols: int, first: int, src_cols: int, *, transpose: bool = False) -> None:
    """LoadData 2D of a ``rows x cols`` block of fractals out of ``src`` (fractals row by row,
    ``src_cols`` per row, the block starting at fractal ``first``) into ``dst``, row by row.

    One instruction when the block is whole rows of ``src``; else one per row of the block, or one per
    column (strided, with ``dst_gap`` laying the rows out), whichever needs fewer."""
    frac = 512 // src.dtype.itemsize
    if cols == src_cols and first % src_cols == 0:
        _load(dst, src, first, rows * cols, 1, 0, transpose)
    elif rows <= cols:   # each row of the block is a run of ``cols`` fractals
        for r in range(rows):
            _load(dst[r * cols * frac:], src, first + r * src_cols, cols, 1, 0, transpose)
    else:                # each column is ``rows`` fractals, ``src_cols`` apart
        for j in range(cols):
            _load(dst[j * frac:], src, first + j, rows, src_cols, cols - 1, transpose)


def _load(dst, src, start: int, repeat: int, src_stride: int, dst_gap: int, transpose: bool) -> None:
    """load_data in pieces of at most 255 repeats."""
    frac = 512 // src.dtype.itemsize
    done = 0
    while done < repeat:
        r = min(255, repeat - done)
        ns.load_data(dst[done * (1 + dst_gap) * frac:], src, ns.LoadData2DParams(
            start_index=start + done * src_stride, repeat_times=r, src_stride=src_stride, dst_gap=dst_gap,
            if_transpose=transpose))
        done += r


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


class _Drain:
    """CopyOut of an accumulator: Fixpipe L0C -> GM (NZ -> ND, cast, optional ReLU and per-column dequant
    scales), or on cores without Fixpipe L0C -> UB (V), a cast in UB (V) and NZ rows -> GM rows (MTE3)."""

    def __init__(self, pipe, cfg, c, n: int, bm16: int, bn16: int, acc, deq_scale, relu: bool):
        self.c, self.n, self.deq_scale, self.relu = c, n, deq_scale, relu
        self.via_ub = not cfg.has_fixpipe
        self.first = True
        if self.via_ub:
            self.q_ub, self.q_out = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECOUT)
            pipe.init_buffer(self.q_ub, 1, bm16 * bn16 * acc.itemsize)
            pipe.init_buffer(self.q_out, 1, bm16 * bn16 * c.dtype.itemsize)
        if deq_scale is not None:
            self.scale_buf = ns.TBuf(ns.TPosition.A1)  # read by Fixpipe: no queue pairs MTE2 with FIX
            pipe.init_buffer(self.scale_buf, bn16 * 4)

    def __call__(self, q_co1, i0: int, j0: int, tm: int, tn: int) -> None:
        c, n = self.c, self.n
        c_l0 = q_co1.deque()
        m1, n1 = -(-tm // 16), -(-tn // 16)
        if self.via_ub:
            self._via_ub(c_l0, i0, j0, tm, tn, m1, n1)
        else:
            scale = None
            if self.deq_scale is not None:
                scale = self.scale_buf.get(ns.float32)
                if not self.first:
                    ns.wait_flag(ns.HardEvent.FIX_MTE2, 0)  # the previous Fixpipe has read the old scales
                ns.data_copy(scale, self.deq_scale[j0:], n1 * 16)
                ns.set_flag(ns.HardEvent.MTE2_FIX, 0)       # the new scales are in L1...
                ns.wait_flag(ns.HardEvent.MTE2_FIX, 0)      # ...before Fixpipe reads them
            ns.fixpipe(c[i0 * n + j0:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=n, relu=self.relu,
                                                               deq_scale=scale))
            if self.deq_scale is not None:
                ns.set_flag(ns.HardEvent.FIX_MTE2, 0)
        self.first = False
        q_co1.free_tensor(c_l0)

    def finish(self) -> None:
        if self.deq_scale is not None and not self.first:
            ns.wait_flag(ns.HardEvent.FIX_MTE2, 0)

    def _via_ub(self, c_l0, i0, j0, tm, tn, m1, n1) -> None:
        c, n = self.c, self.n
        count = m1 * n1 * 256
        ub = self.q_ub.alloc_tensor(c_l0.dtype)
        ns.data_copy(ub, c_l0, count)
        self.q_ub.enque(ub)
        ub = self.q_ub.deque()
        out = self.q_out.alloc_tensor(c.dtype)
        if c.dtype != ub.dtype:
            ns.cast(out, ub, ns.RoundMode.CAST_RINT, count)
        else:
            ns.data_copy(out, ub, count)
        self.q_ub.free_tensor(ub)
        self.q_out.enque(out)
        out = self.q_out.deque()
        esz = c.dtype.itemsize
        for j in range(n1):  # each NZ column block holds 16 columns of every row: one 16-wide piece per row
            w = min(16, tn - j * 16)
            ub_gap = (16 * esz - -(-w * esz // 32) * 32) // 32  # UB rows are 16 elements apart
            ns.data_copy_pad(c[i0 * n + j0 + j * 16:], out[j * m1 * 256:], ns.DataCopyExtParams(
                block_count=tm, block_len=w * esz, src_stride=ub_gap, dst_stride=(n - w) * esz))
        self.q_out.free_tensor(out)


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
    if min(m, n, k) == 0:
        raise ns.UsageError(f"run_matmul of a {a.shape} by a {b.shape} matrix has nothing to launch (an empty "
                            f"{'sum: the product is zeros' if k == 0 else 'result'}); ops.call('matmul', a, b) "
                            f"returns it without a launch")
    tiling.check(cfg, a.dtype, out_dtype, k)
    c = np.zeros((m, n), dtype=out_dtype)
    return ns.launch(matmul, block_dim, np.ascontiguousarray(a), np.ascontiguousarray(b), c, m, n, k, tiling,
                     config=cfg, sanitize=sanitize)
