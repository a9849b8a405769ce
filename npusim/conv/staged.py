"""img2col with a staged start, as production conv kernels run on a whole chip (``ConvTiling.staged``).

The plain img2col kernel (:mod:`.img2col`) loads every weight and its first band whole before its first
Mmad, and hands work items to the cores round-robin. On 24 cores that start is not hidden: every core
fetches a 50-300 KB band and the weights at once, at its share of the HBM, before the Cube does
anything (a third of a ResNet-18 layer2 conv's time at batch 8). CANN's conv tiling
(``conv3d_tiling_algorithm.h`` of cann/asc-devkit: ``FULL_LOAD_BL1``, ``kAL1`` / ``kBL1``, ``pbAL1``)
keeps a core's weights in L1 when they fit, loads the feature map and the weights in K slices, and
ping-pongs the L1 buffers, so that the Cube starts after the first K slice. This kernel does the same:

- a core computes one **Cout group** (``cout_split`` groups), and holds that group's weights in L1,
  laid out block-major (one contiguous run of fractals per Cout block and K step: one ``load_data``
  per Mmad);
- its **first band and the group's weights arrive in K order, in up to 8 pieces**: piece ``p`` is the
  input channels (C1 blocks) and the weight rows of a run of K steps, followed by
  ``set_flag(MTE2_MTE1, p)``; the first tile's K step that needs piece ``p`` waits for that flag, so the
  first Mmad waits for one piece, not for everything;
- the bands of each group are shared out over its cores so that their rows are as equal as can be
  (:meth:`~npusim.conv.tiling.ConvTiling.core_items`); later bands are double-buffered as before.

The values are the plain kernel's: the same Mmads over the same K steps in the same order.
"""

from __future__ import annotations

import npusim as ns

from .common import ceil_div, load_fractals, round_up
from .img2col import STAGED, KernelImg2col

MAX_PIECES = 8
"""Pieces of the staged start: one MTE2 -> MTE1 event id each (a2 has 8 per HardEvent)."""


class KernelImg2colStaged(KernelImg2col):
    """The img2col kernel with per-group resident weights and a staged start (module docstring)."""

    def process(self) -> None:
        g, t = self.g, self.t
        items = t.core_items(g, ns.get_block_idx(), ns.get_block_num())
        if not items:
            return
        self.cins = t.cin_blocks(g)   # one block: a staged tiling holds every input channel in its band
        self.c_l1 = self.load_resident(self.q_const, self.const, (1 + g.n1) * self.fr)
        if self.epilogue.dequant:
            self.drain.load_scales(self.scale)
        self.k_block = ceil_div(g.cin, g.c0) * g.kk * g.c0
        steps = ceil_div(self.k_block, t.k_tile)
        n_pieces = min(MAX_PIECES, steps, ns.get_core_config().event_ids)
        # piece p: K steps [first[p], first[p + 1])
        self.piece_first = [p * steps // n_pieces for p in range(n_pieces + 1)]
        self.w_l1, self.group, self.loaded = None, None, 0
        ahead = t.l1_buffers > 1
        # at most l1_buffers bands are in L1: after the k-th band is freed, the DMAs of the bands up to
        # k + l1_buffers - 1 are issued (the prefetch)
        # the first pass: two bands of the same group when L1 holds two, so that twice the Mmads share
        # each weight piece while the weights stream in
        pair = ahead and t.l0c_buffers > 1 and len(items) > 1 and items[1][1] == items[0][1]
        first = items[:2] if pair else items[:1]
        pending: dict[int, int] = {}
        staged = self.load_group(items[0][1], pending, [band for band, _ in first])
        self.loaded = len(first)
        self.first_pass([(band, grp, x) for (band, grp), x in zip(first, staged)], pending, items)
        for i in range(len(first), len(items)):
            band, grp = items[i]
            pending = {}
            if grp != self.group:
                self.load_group(grp, pending)
            self.pending = pending
            x_l1 = self.q_band.deque()
            for tl in self.tiles(band, grp):
                self.compute_tile(band, tl, 0, x_l1)
            self.wait_pending()
            self.q_band.free_tensor(x_l1)
            self.issue_bands(items, i + t.l1_buffers)   # into the buffer just freed
        self.q_w.free_tensor(self.w_l1)
        self.q_const.free_tensor(self.c_l1)

    def issue_bands(self, items, upto: int) -> None:
        """Issue the band DMAs of every item up to ``upto`` not yet issued (the next band's prefetch)."""
        while self.loaded <= min(upto, len(items) - 1):
            band, grp = items[self.loaded]
            self.copy_in_band((band, None, 0, grp))
            self.loaded += 1

    def wait_pending(self) -> None:
        """Wait for the pieces no K step has waited for (a band of padding rows has no K work)."""
        for _, p in sorted(self.pending.items()):
            ns.wait_flag(ns.HardEvent.MTE2_MTE1, p)
        self.pending = {}

    # --- the weights of one Cout group, block-major in L1 ---------------------------------------------
    def block_offsets(self, grp: int) -> list[tuple[int, int, int]]:
        """``(first Cout, channels, first fractal in L1)`` of each Cout block of group ``grp``."""
        out, base = [], 0
        for co0, cb in self.t.group_blocks(self.g, grp):
            out.append((co0, cb, base))
            base += self.g.k1 * ceil_div(cb, 16)
        return out

    def copy_weight_piece(self, w_l1, grp: int, p: int) -> None:
        """The FRACTAL_Z rows of piece ``p``'s K steps, for every Cout block of the group: one DMA each."""
        g, t = self.g, self.t
        k1_0 = self.piece_first[p] * t.k_tile // g.c0
        k1_1 = min(self.piece_first[p + 1] * t.k_tile, self.k_block) // g.c0
        for co0, cb, base in self.block_offsets(grp):
            n1b = ceil_div(cb, 16)
            ns.data_copy(w_l1[(base + k1_0 * n1b) * self.fr:], self.wz[(k1_0 * g.n1 + co0 // 16) * self.fr:],
                         ns.DataCopyParams(block_count=k1_1 - k1_0, block_len=n1b * 16,
                                           src_stride=(g.n1 - n1b) * 16))

    def load_group(self, grp: int, pending: dict[int, int], bands=()) -> list:
        """(Re)fill the weights buffer with group ``grp``'s weights, piece by piece; with ``bands``, also
        allocate and fill those bands, each piece's C1 blocks before its weight rows. Piece 0 is handed
        over by the queues (enque, deque: MTE1 waits for it), every later piece ``p`` by
        ``set_flag(MTE2_MTE1, p)``, waited for by the first K step that reads it (``pending``). Returns
        the bands' tensors."""
        if self.w_l1 is not None:
            self.q_w.free_tensor(self.w_l1)        # after the last Mmad's load of the previous group
        w_l1 = self.q_w.alloc_tensor(self.dt)
        band_l1 = [self.q_band.alloc_tensor(self.dt) for _ in bands]
        self.group = grp
        g, t = self.g, self.t
        per_c1 = g.kk * g.c0                        # im2col columns of one C1 block
        c1_done = 0
        for p in range(len(self.piece_first) - 1):
            k_end = min(self.piece_first[p + 1] * t.k_tile, self.k_block)
            c1_need = ceil_div(k_end, per_c1)
            if bands and c1_need > c1_done:
                for band, x in zip(bands, band_l1):
                    self.copy_band_c1(band, x, c1_done, c1_need)
                c1_done = c1_need
            self.copy_weight_piece(w_l1, grp, p)
            if p == 0:   # the queues hand over the first piece; the tensors are the consumer's from here
                self.q_w.enque(w_l1)
                self.w_l1 = self.q_w.deque()
                for x in band_l1:
                    self.q_band.enque(x)
                band_l1 = [self.q_band.deque() for _ in band_l1]
            else:
                ns.set_flag(ns.HardEvent.MTE2_MTE1, p)
                pending[self.piece_first[p]] = p
        return band_l1

    def copy_band_c1(self, band, band_l1, c1_lo: int, c1_hi: int) -> None:
        """C1 blocks ``c1_lo .. c1_hi`` of the band's rows, one DMA (each block's rows are one run)."""
        g = self.g
        n, ho0, rows = band
        lo, hi, _, _ = self.band_rows(ho0, rows)
        if hi <= lo:
            return
        ns.data_copy(band_l1[c1_lo * (hi - lo) * g.w * g.c0:], self.x5[((n * g.c1 + c1_lo) * g.h + lo) * g.w * g.c0:],
                     ns.DataCopyParams(block_count=c1_hi - c1_lo, block_len=(hi - lo) * g.w,
                                       src_stride=(g.h - (hi - lo)) * g.w))

    # --- compute ------------------------------------------------------------------------------------------
    def first_pass(self, jobs, pending: dict[int, int], items) -> None:
        """The first band(s) ``(band, group, tensor)``: their first tiles K step by K step, side by side in
        L0C (each step waits for its piece), then the rest of their tiles; each band is freed as soon
        as it is done, and the next bands' DMAs are issued into its buffer."""
        g, t = self.g, self.t
        self.issue_bands(items, t.l1_buffers - 1)   # the prefetch into the buffers the first pass leaves
        self.pending = pending
        firsts = []
        for band, grp, _ in jobs:
            tl = self.tiles(band, grp)[0]
            acc = self.q_acc.alloc_tensor(self.acc_dt)
            lo, hi, _, _ = self.band_rows(band[1], band[2])
            init = not (self.has_bias or hi <= lo)
            if not init:   # bias (or zeros) first: a band of padding rows has no K work
                self.bias_mmad(acc, tl[1], tl[2], tl[3])
            firsts.append([tl, acc, init, hi > lo])
        for k0 in range(0, self.k_block, t.k_tile):
            kt = min(t.k_tile, self.k_block - k0)
            for (band, _, x), st in zip(jobs, firsts):
                (m0, mt, co0, cb), acc, init, work = st
                if work:
                    self.mmad_step(acc, x, band, 0, m0, mt, k0, k0, kt, co0, cb, init)
                    st[2] = False
        self.wait_pending()
        for (band, grp, x), (tl, acc, _, _) in zip(jobs, firsts):
            self.drain_tile(band, tl, acc)
        for i, (band, grp, x) in enumerate(jobs):
            for tl in self.tiles(band, grp)[1:]:
                self.compute_tile(band, tl, 0, x)
            self.q_band.free_tensor(x)
            self.issue_bands(items, i + t.l1_buffers)   # into the buffer just freed

    def drain_tile(self, band, tile, acc) -> None:
        """The finished accumulator ``acc`` of ``tile`` to GM through the drain (as compute_tile's end)."""
        g = self.g
        n, ho0, _ = band
        m0, mt, co0, cb = tile
        self.q_acc.enque(acc)
        acc = self.q_acc.deque()
        self.drain(self.y[((n * g.ho + ho0) * g.wo + m0) * g.cout + co0:], acc, mt, cb, round_up(mt, 16), g.cout,
                   col0=co0)
        self.q_acc.free_tensor(acc)

    def mmad_step(self, acc, x_l1, band, k: int, m0, mt, k0, kw0, kt, co0, cb, first) -> None:
        p = self.pending.pop(k0 // self.t.k_tile, None)
        if p is not None:
            ns.wait_flag(ns.HardEvent.MTE2_MTE1, p)   # MTE1 waits for this piece's band rows and weights
        super().mmad_step(acc, x_l1, band, k, m0, mt, k0, kw0, kt, co0, cb, first)

    def load_weights(self, b, k1_0: int, k1_n: int, n1_0: int, n1_n: int) -> None:
        """The (k1_n x n1_n) fractals of the group's block that starts at Cout ``16 * n1_0``: one run."""
        base = next(base for co0, _, base in self.block_offsets(self.group) if co0 == n1_0 * 16)
        load_fractals(b, self.w_l1, base + k1_0 * n1_n, k1_n * n1_n)


STAGED.append(KernelImg2colStaged)
