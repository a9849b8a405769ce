"""The hint ladders of lab 04's exercises (kept apart from the checks of :mod:`.lab04_conv`, which
collects them): a direction, the approach without its key step, then a skeleton whose blanks are the
skill (the band's rows and slots, the transform's offsets and gap, load_data_3d's extensions, starts and
paddings, the band and Mmad sizes)."""

from __future__ import annotations

from ._flow import Skeleton

_SETUP = ("04_con-356a192b",)

_REUSE = """\
class MyReuse(BandConv):
    def output_bands(self) -> list[tuple[int, int, int]]:
        g, t = self.g, self.t
        return [(n, ho0, ___) for n in range(g.n) for ho0 in range(___)]

    def input_rows(self, ho0: int, rows: int) -> tuple[int, int]:
        g = self.g
        return ___, ___              # (padded row, count)

    def load_band(self, copies, band) -> None:
        first, count = self.input_rows(band.ho0, band.rows)
        for j in range(self.g.kw):
            for slot in range(___):
                self.load_row(copies, band, j, slot, ___)

    def band_row(self, r: int, i: int) -> int:
        return ___"""

_TRANSFORM = """\
@ns.kernel
def my_to_nc1hwc0(x, x5, n: int, c: int, h: int, w: int) -> None:
    isz = x.dtype.itemsize
    c0 = 32 // isz
    c1 = -(-c // c0)
    hw = h * w
    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)   # GM -> UB (MTE2) -> GM (MTE3)
    pipe.init_buffer(q, 2, SLOTS * 32)
    zeros = ZeroWriter(pipe, x.dtype)
    for b in range(n):
        if c % c0:
            zeros(x5[(b * c1 + c1 - 1) * hw * c0:], hw * c0)   # MTE3, before the channels (same pipe: in order)
        for ch in range(c):
            src = (b * c + ch) * hw
            dst = ___                      # where channel ch's first position lands in x5
            for p0 in range(0, hw, SLOTS):
                cnt = ___
                t = q.alloc_tensor(x.dtype)
                ns.data_copy_pad(t, x[___:], ns.DataCopyExtParams(cnt, isz, 0, 0))   # an element per 32 B slot
                q.enque(t)
                t = q.deque()
                ns.data_copy_pad(x5[___:], t, ns.DataCopyExtParams(cnt, isz, 0, ___))   # the gap after each
                q.free_tensor(t)"""

_IMG2COL = """\
class MyImg2col(Im2colConv):
    def load_3d(self, a, x_l1, tile) -> None:
        g = self.g
        top = tile.ho0 * g.sh - g.ph                 # the band's first window row (image rows; < 0: padding)
        bottom = ___                                 # one past its last window row
        ns.load_data_3d(a, x_l1, ns.LoadData3DParams(
            l1_h=___, l1_w=g.w, channel_size=-(-tile.cin // g.c0) * g.c0, kh=g.kh, kw=g.kw,
            m_extension=___, k_extension=___, m_start=___, k_start=___,
            stride_h=g.sh, stride_w=g.sw, dilation_h=g.dh, dilation_w=g.dw,
            pad_top=___, pad_bottom=___,
            pad_left=g.pw, pad_right=g.pw))"""

_TILING = """\
def my_tiling() -> ConvTiling:
    rows = ___      # output rows per band: a band holds rows * g3.wo output positions
    m_tile = ___    # positions per Mmad (at most 128): a band is cut into Mmads of m_tile from its start
    return choose_tiling(g3).replace(rows=rows, m_tile=m_tile)"""

HINTS = {
    "conv-reuse": (
        "Section 2's direct kernel fetches the input row of every (output row, height tap, width tap) from GM. "
        "Turn it around: a band of output rows reads a run of consecutive input rows; load that run once per "
        "width tap, and let every output row and height tap of the band read its row from L1. Work out on "
        "paper, for stride 2 and dilation 2, which input rows output rows 0, 1 and 2 read.",
        "output_bands: every image cut into bands of at most self.t.rows output rows (the last band takes what "
        "is left). input_rows: the padded input row that the band's first output row starts its window at, "
        "and how many consecutive rows the band reads, up to the last tap of its last output row. load_band: "
        "every row of that run, in its slot (its place in the run), once per width tap. band_row: which slot "
        "output row r of the band reads at height tap i (the stride moves the window, the dilation spaces its "
        "taps).",
        Skeleton(_REUSE, call="check.conv_reuse(MyReuse)", cells=_SETUP),
    ),
    "nc1hwc0-transform": (
        "NC1HWC0 puts the C0 channels of one position next to each other; NCHW the positions of one channel. "
        "So the positions of one channel land C0 elements apart: a DMA that moves one element per block, with "
        "the right gap between the blocks, does it. And a channel plane can be longer than one buffer.",
        "For each image and channel: where its plane starts in x, and where its first position lands in x5 "
        "(which C1 block of which image, which lane). Cut the plane into rounds of at most SLOTS positions "
        "(a buffer holds SLOTS 32 B slots). Per round: a data_copy_pad GM -> UB that puts one element in each "
        "32 B slot, the queue hand-over, and a data_copy_pad UB -> GM whose gap after each element puts the "
        "positions C0 apart (DataCopyExtParams(block_count, block_len, src_stride, dst_stride), strides in "
        "bytes). The padding channels are zeroed first (ZeroWriter).",
        Skeleton(_TRANSFORM, call="check.nc1hwc0_transform(my_to_nc1hwc0)", cells=_SETUP),
    ),
    "conv-img2col": (
        "load_data_3d needs to know three things: the image it reads (what is in L1: which rows, how wide, how "
        "many channels), the window (kernel size, stride, dilation, and the padding around the image that is "
        "NOT in L1), and the piece of the im2col matrix it writes (rows = output positions, columns = K).",
        "The image in L1 is the band's rows that exist (tile.first_row on, tile.l1_rows of them), W wide, the "
        "Cin block's channels rounded up to C0. The padding above is what lies between the band's first window "
        "row and the first row in L1; below, between the last row in L1 and the band's last window row. The "
        "piece: this Mmad's positions (tile.m0 on, tile.m of them, in whole fractal rows) by this K step's "
        "columns (tile.k0 on, tile.k of them).",
        Skeleton(_IMG2COL, call="check.conv_img2col(MyImg2col)", cells=_SETUP),
    ),
    "conv-tiling": (
        "The Cube is the critical pipe and runs without a gap from its first Mmad to its last: the time is the "
        "start (before the first Mmad) + the Cube's busy time + the end. Compare the Cube's busy time with its "
        "ideal time (the useful MACs at the peak rate): what is the difference made of?",
        "The Cube works in whole fractals: an Mmad of m positions costs as much as one of m rounded up to 16. "
        "A band of rows x Wo positions is cut into Mmads of m_tile positions from its start, so the last one "
        "gets what is left. Count the default's: positions per band (its explain() says), its Mmads, and what "
        "the last one is computed as. Then look for a band and an Mmad size with no padded positions (L0C "
        "still has to hold two m_tile x Cout fp32 accumulators).",
        Skeleton(_TILING, call="check.conv_tiling(my_tiling)",
                 cells=_SETUP + ("04_con-77de68da", "04_con-761f22b2")),
    ),
}
