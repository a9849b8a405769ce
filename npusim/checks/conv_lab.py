"""Lab 04 (blocked Conv2D): learner-friendly hooks around the kernels of :mod:`npusim.conv`.

- :class:`BandConv` is the reuse variant (input tiling, :class:`npusim.conv.reuse.KernelReuse`) with the
  two decisions that make it "input tiling with reuse" left to a subclass: which input rows a band loads
  (``load_band``) and which of them an output row reads at a height tap (``band_row``). Everything else
  (queues, weights, staging of padded NCHW input, the Mmads, the drain) is the package's.
  :func:`run_band_conv` launches it like ``npusim.conv.run_reuse``.
- :class:`ZeroWriter` writes zeros to GM from UB (for the padding channels of a layout transform).
- :func:`conv2d_float64` is the exact reference; :func:`explore_tiling` makes a valid
  :class:`~npusim.conv.ConvTiling` from a few sizes (the lab's explorer).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import npusim as ns

from ..conv import host
from ..conv.api import ConvResult
from ..conv.common import ceil_div, fractal, round_up
from ..conv.geometry import ConvGeometry, dtype_of
from ..conv.reuse import KernelReuse, nd2nz_channels
from ..conv.staging import workspace_shape
from ..conv.choose import choose_tiling
from ..conv.tiling import ConvTiling, needs_staging


class Band(NamedTuple):
    """One band of output rows, as :meth:`BandConv.load_band` receives it."""

    n: int          # image
    ho0: int        # first output row
    rows: int       # output rows in the band
    wo0: int        # first output column of the tile
    cols: int       # output columns of the tile
    k: int          # input channel block (index into the tiling's Cin blocks)


class BandConv(KernelReuse):
    """The reuse kernel with its band loading left open (lab 04, exercise 1).

    A band of ``band.rows`` output rows is computed from ONE L1 buffer, ``copies``, holding
    ``self.slots`` input rows per width tap ``j``. Subclasses write

    - ``load_band(copies, band)``: fill ``copies`` with :meth:`load_row` (each call moves one input row
      of the band, for one width tap, from GM to its slot in L1);
    - ``band_row(r, i) -> int``: the input row of the band (0 = the band's first input row) that output
      row ``r`` of the band reads at height tap ``i``.

    Input rows are counted in padded coordinates (row 0 of the band is ``band.ho0 * stride_h`` in the
    padded image); :meth:`load_row` takes care of the padding.
    """

    # --- the two decisions (a subclass writes them) ---------------------------------------------------
    def load_band(self, copies, band: Band) -> None:
        raise NotImplementedError("load_band: load the band's input rows, once per width tap")

    def band_row(self, r: int, i: int) -> int:
        raise NotImplementedError("band_row: the band's input row that output row r reads at height tap i")

    # --- what the package provides ------------------------------------------------------------------
    @property
    def slots(self) -> int:
        """Input rows one copy (one width tap) of the band buffer holds."""
        return self.t.band_in_rows(self.g)

    def load_row(self, copies, band: Band, j: int, row: int) -> None:
        """Input row ``row`` of ``band`` (0 = its first), shifted for width tap ``j``, GM -> L1 slot
        ``(j, row)`` of ``copies``: all channels of the band's Cin block, ``band.cols`` positions."""
        g = self.g
        if not (0 <= j < g.kw):
            raise ns.UsageError(f"load_row: width tap j={j}; this kernel has taps 0..{g.kw - 1}")
        if not (0 <= row < self.slots):
            raise ns.UsageError(f"load_row: row={row}, but a band buffer holds {self.slots} input rows per "
                                f"width tap (rows 0..{self.slots - 1}): a band of {self.t.rows} output rows "
                                f"reads (rows - 1) * stride + (Kh - 1) * dilation + 1 = {self.slots} of them")
        ci0, cc = self.cins[band.k]
        cc1, w1 = ceil_div(cc, 16), ceil_div(band.cols, 16)
        dst = copies[(j * self.slots + row) * cc1 * w1 * fractal(self.dt):]
        r = band.ho0 * g.sh + row
        nd2nz_channels(dst, lambda c: self.stager.at(band.n, c, r, j, band.wo0), ci0, cc, band.cols,
                       self.stager.plane)

    def copy_in(self, job) -> None:
        g = self.g
        (n, ho0, rows, wo0, cols), _, k = job
        self.stager.need_rows(n, ho0 * g.sh + g.in_rows(rows))     # padded NCHW staged in GM, if needed
        copies = self.q_in.alloc_tensor(self.dt)
        self.load_band(copies, Band(n, ho0, rows, wo0, cols, k))
        self.q_in.enque(copies)


class ReferenceBand(BandConv):
    """The package's answer to exercise 1 (used by the tests): each band input row once per width tap."""

    def load_band(self, copies, band: Band) -> None:
        for j in range(self.g.kw):
            for row in range(self.g.in_rows(band.rows)):
                self.load_row(copies, band, j, row)

    def band_row(self, r: int, i: int) -> int:
        return r * self.g.sh + i * self.g.dh


@ns.kernel
def band_conv(x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool, kernel_class) -> None:
    """NCHW ``y`` = conv2d of NCHW ``x`` by ``kernel_class`` (a :class:`BandConv` subclass)."""
    kernel_class(x, ws, wz, const, y, g, t, has_bias).process()


def _rowwise_const(g: ConvGeometry, b) -> np.ndarray:
    bias = b if b is not None else np.zeros(g.cout, dtype=dtype_of(g.dtype))
    return np.concatenate([host.bias_column_zz(bias, g), host.ones_fractal(g)])


def band_conv_args(kernel_class, x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None,
                   tiling: ConvTiling | None = None, config=None, block_dim: int = 1) -> tuple:
    """Everything :func:`band_conv` is launched with, prepared on the host: ``(args, geometry, tiling)``.
    ``args`` = ``(x, ws, wz, const, y, g, t, has_bias, kernel_class)``; ``y`` is filled with NaN."""
    if not (isinstance(kernel_class, type) and issubclass(kernel_class, BandConv)):
        raise ns.UsageError(f"a band convolution needs a subclass of BandConv, not {kernel_class!r}")
    cfg = ns.get_config(config)
    x = np.ascontiguousarray(np.asarray(x))
    w = np.asarray(w)
    g = ConvGeometry.of(x.shape, w.shape, stride, padding, dilation, x.dtype, out_dtype)
    t = tiling if tiling is not None else choose_tiling(g, cfg, "reuse")
    if t.variant != "reuse":
        raise ns.UsageError(f"a band convolution needs a 'reuse' tiling, not '{t.variant}'")
    t.check(g, cfg)
    b = host.check_bias(bias, g)
    wz = host.fractal_z_weights(w, g)
    ws = np.empty(workspace_shape(g, block_dim), dtype=x.dtype)
    y = np.full((g.n, g.cout, g.ho, g.wo), np.nan, dtype=dtype_of(g.out_dtype))
    return (x, ws, wz, _rowwise_const(g, b), y, g, t, b is not None, kernel_class), g, t


def run_band_conv(kernel_class, x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None,
                  tiling: ConvTiling | None = None, config=None, block_dim: int = 1,
                  sanitize: str = "error") -> ConvResult:
    """``npusim.conv.run_reuse`` with ``kernel_class`` (a :class:`BandConv` subclass) as the kernel."""
    cfg = ns.get_config(config)
    args, g, t = band_conv_args(kernel_class, x, w, bias, stride, padding, dilation, out_dtype=out_dtype,
                                tiling=tiling, config=cfg, block_dim=block_dim)
    res = ns.launch(band_conv, block_dim, *args, config=cfg, sanitize=sanitize, algorithmic_macs=g.macs)
    work = [f"weights (Cout, Cin, Kh, Kw) -> FRACTAL_Z, {args[2].nbytes:,} B: converted once on the host"]
    if needs_staging(g):
        work.append(f"a GM workspace of {args[1].nbytes:,} B for the padded rows")
    return ConvResult("reuse", res["y"], res.profile, t, g, {}, tuple(work))


# --- zeros for the layout transform ---------------------------------------------------------------------

class ZeroWriter:
    """Writes zeros to GM on MTE3, from a UB buffer filled once by the vector unit.

    ``zeros = ZeroWriter(pipe, dtype)`` in a kernel's set-up, then ``zeros(dst, count)`` writes ``count``
    zero elements from ``dst`` on. The writes are MTE3 instructions, so later MTE3 copies to the same
    addresses happen after them (one pipe runs in order)."""

    def __init__(self, pipe: ns.TPipe, dtype, nbytes: int = 16 * 1024):
        self.buf = ns.TBuf(ns.TPosition.VECCALC)
        pipe.init_buffer(self.buf, nbytes)
        self.z = self.buf.get(np.dtype(dtype))
        ns.duplicate(self.z, 0, self.z.size)
        ns.set_flag(ns.HardEvent.V_MTE3, 0)       # the zeros are in UB before MTE3 reads them
        ns.wait_flag(ns.HardEvent.V_MTE3, 0)

    def __call__(self, dst, count: int) -> None:
        for off in range(0, count, self.z.size):
            ns.data_copy_pad(dst[off:], self.z, min(self.z.size, count - off))


# --- references and tiling helpers ----------------------------------------------------------------------

def _pair(v):
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def conv2d_float64(x, w, bias=None, stride=1, padding=0, dilation=1) -> np.ndarray:
    """The exact Conv2D of the values ``x`` and ``w`` hold, in float64 (a sum over the taps)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    x = np.asarray(x).astype(np.float64)
    w = np.asarray(w).astype(np.float64)
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, cin, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((n, cout, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias).astype(np.float64)[None, :, None, None]
    return out


def explore_tiling(g: ConvGeometry, variant: str, rows: int, cols: int, cin_block: int, cout_block: int,
                   config=None) -> ConvTiling:
    """A tiling of ``variant`` with these sizes, the rest as :func:`~npusim.conv.choose_tiling` chose.

    Sizes beyond the layer are clipped (``rows`` to Ho, ``cols`` to Wo, the blocks to the channels);
    img2col always takes whole rows (``cols`` = Wo) and its Mmad tiles (``m_tile``, ``k_tile``) are
    shrunk until the buffers fit. The result is checked: a size that is invalid or does not fit raises
    the simulator's UsageError or CapacityError, which says why."""
    cfg = ns.get_config(config)
    base = choose_tiling(g, cfg, variant)
    rows = max(1, min(rows, g.ho))
    cols = g.wo if (variant == "img2col" or cols >= g.wo) else cols
    cin_block = g.cin if cin_block >= g.cin else cin_block
    cout_block = g.cout if cout_block >= g.cout else cout_block
    t = base.replace(rows=rows, cols=cols, cin_block=cin_block, cout_block=cout_block)
    if variant == "img2col":
        c0 = g.c0
        positions = rows * g.wo
        m_tile = min(base.m_tile, round_up(positions, 16))
        k_block = ceil_div(min(cin_block, g.cin), c0) * g.kk * c0
        k_tile = min(base.k_tile, k_block)
        t = t.replace(m_tile=m_tile, k_tile=k_tile)
        for _ in range(32):          # shrink the Mmad tiles until the buffers fit
            use = t.usage(g, cfg)
            if all(v <= cfg.memory_bytes(mem) for mem, v in use.items()):
                break
            if t.k_tile > c0:
                t = t.replace(k_tile=max(c0, t.k_tile // 2 // c0 * c0))
            elif t.m_tile > 16:
                t = t.replace(m_tile=max(16, t.m_tile // 2 // 16 * 16))
            else:
                break
    t.check(g, cfg)
    return t


__all__ = ["Band", "BandConv", "ReferenceBand", "band_conv", "band_conv_args", "run_band_conv", "ZeroWriter", "conv2d_float64",
           "explore_tiling"]
