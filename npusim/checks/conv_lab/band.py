"""Lab 04, exercise 1: the reuse kernel (input tiling) with its blocking left to the learner.

:class:`BandConv` is :class:`npusim.conv.reuse.KernelReuse` with the four decisions that make it "input
tiling with reuse" left to a subclass: how the output rows are cut into bands (``output_bands``), which
input rows one band reads (``input_rows``), loading each of them once per width tap (``load_band``), and
which of them an output row reads at a height tap (``band_row``). Everything else (queues, weights,
staging of padded NCHW input, the Mmads, the drain) is the package's. :func:`run_band_conv` launches it
like ``npusim.conv.run_reuse``; with a ``trace`` dict the kernel records what the learner's code did
(bands, loads, reads), from which the check explains a wrong output.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import npusim as ns

from ...conv import host
from ...conv.api import ConvResult
from ...conv.common import ceil_div, fractal
from ...conv.geometry import ConvGeometry, dtype_of
from ...conv.reuse import KernelReuse, nd2nz_channels
from ...conv.staging import workspace_shape
from ...conv.tiling import ConvTiling, needs_staging
from .reference import prepare


class Band(NamedTuple):
    """One band of output rows, as :meth:`BandConv.load_band` receives it."""

    n: int          # image
    ho0: int        # first output row
    rows: int       # output rows in the band
    wo0: int        # first output column of the tile
    cols: int       # output columns of the tile
    k: int          # input channel block (index into the tiling's Cin blocks)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


class BandConv(KernelReuse):
    """The reuse kernel with its blocking left open (lab 04, exercise 1).

    A band of output rows is computed from ONE L1 buffer, ``copies``: ``self.slots`` input rows for each
    width tap ``j`` (copy ``j`` is shifted by ``j`` dilated columns). Subclasses write

    - ``output_bands() -> [(image, first output row, rows), ...]``: every output row in one band, each band
      at most ``self.t.rows`` rows (L0C holds one accumulator per output row of a band);
    - ``input_rows(ho0, rows) -> (first, count)``: the padded input rows the band's output rows read;
    - ``load_band(copies, band)``: fill ``copies`` with :meth:`load_row` (one call moves one input row, for
      one width tap, from GM into a slot of L1);
    - ``band_row(r, i) -> int``: the slot holding the input row that output row ``r`` of the band reads at
      height tap ``i``.

    Input rows are counted in padded coordinates (row 0 is the first padding row); :meth:`load_row`
    takes care of the padding.
    """

    trace: dict | None = None

    # --- the learner's decisions --------------------------------------------------------------------
    def output_bands(self) -> list[tuple[int, int, int]]:
        raise NotImplementedError("output_bands: every output row in exactly one band")

    def input_rows(self, ho0: int, rows: int) -> tuple[int, int]:
        raise NotImplementedError("input_rows: the input rows a band reads")

    def load_band(self, copies, band: Band) -> None:
        raise NotImplementedError("load_band: the band's input rows in L1, once per width tap")

    def band_row(self, r: int, i: int) -> int:
        raise NotImplementedError("band_row: the slot that output row r reads at height tap i")

    # --- what the package provides ------------------------------------------------------------------
    @property
    def slots(self) -> int:
        """Input rows one copy (one width tap) of the band buffer holds."""
        return self.t.band_in_rows(self.g)

    def bands(self) -> list[tuple[int, int, int]]:
        """The learner's ``output_bands()``, checked: each band lies in the output and fits L0C."""
        g, t = self.g, self.t
        got = self.output_bands()
        if not isinstance(got, (list, tuple)):
            raise ns.UsageError(f"output_bands() must return a list of (image, first output row, rows) "
                                f"tuples, not {type(got).__name__}")
        out = []
        for b in got:
            if not (isinstance(b, tuple) and len(b) == 3 and all(_is_int(v) for v in b)):
                raise ns.UsageError(f"output_bands(): each band is a tuple (image, first output row, rows) of "
                                    f"ints, not {b!r}")
            n, ho0, rows = (int(v) for v in b)
            if not (0 <= n < g.n and 0 <= ho0 < g.ho and 1 <= rows <= t.rows and ho0 + rows <= g.ho):
                raise ns.UsageError(
                    f"output_bands(): band {b} does not fit: images are 0..{g.n - 1}, output rows "
                    f"0..{g.ho - 1}, and a band has 1..{t.rows} rows (tiling rows={t.rows}: L0C holds one "
                    f"accumulator per output row of a band)")
            out.append((n, ho0, rows))
        if self.trace is not None:
            self.trace.setdefault("bands", out)
        return out

    def load_row(self, copies, band: Band, j: int, slot: int, row: int) -> None:
        """Padded input row ``row`` of image ``band.n``, shifted for width tap ``j``, GM -> slot
        ``(j, slot)`` of ``copies``: the channels of the band's Cin block, ``band.cols`` positions."""
        g = self.g
        if not (_is_int(j) and 0 <= j < g.kw):
            raise ns.UsageError(f"load_row: width tap j={j!r}; this kernel has taps 0..{g.kw - 1}")
        if not (_is_int(slot) and 0 <= slot < self.slots):
            raise ns.UsageError(f"load_row: slot={slot!r}, but a band buffer holds {self.slots} input rows per "
                                f"width tap (slots 0..{self.slots - 1}), as many as a band of {self.t.rows} "
                                f"output rows reads")
        if not (_is_int(row) and 0 <= row < g.hp):
            raise ns.UsageError(f"load_row: row={row!r}; the padded input has rows 0..{g.hp - 1} ({g.ph} padding "
                                f"row(s) above and below its {g.h} image rows)")
        if self.trace is not None and self.trace.get("loads"):
            self.trace["loads"][-1][1].append((int(j), int(slot), int(row)))
        ci0, cc = self.cins[band.k]
        cc1, w1 = ceil_div(cc, 16), ceil_div(band.cols, 16)
        dst = copies[(j * self.slots + slot) * cc1 * w1 * fractal(self.dt):]
        nd2nz_channels(dst, lambda c: self.stager.at(band.n, c, row, j, band.wo0), ci0, cc, band.cols,
                       self.stager.plane)

    def copy_in(self, job) -> None:
        (n, ho0, rows, wo0, cols), _, k = job
        self.stager.need_rows(n, self.g.hp)     # padded NCHW staged in GM once per image, if needed
        copies = self.q_in.alloc_tensor(self.dt)
        band = Band(n, ho0, rows, wo0, cols, k)
        if self.trace is not None:      # one entry per copy-in: (band, [(j, slot, row) of each load_row])
            self.trace.setdefault("loads", []).append((band, []))
        self.load_band(copies, band)
        self.q_in.enque(copies)

    def compute(self, job) -> None:
        if self.trace is not None:
            (n, ho0, rows, _, _), _, _ = job
            reads = self.trace.setdefault("reads", {})
            if (n, ho0, rows) not in reads:
                reads[(n, ho0, rows)] = {(r, i): self.band_row(r, i) for r in range(rows) for i in range(self.g.kh)}
        super().compute(job)


class ReferenceBand(BandConv):
    """The package's answer to exercise 1 (the tests' and the explorers' reference)."""

    def output_bands(self):
        g, t = self.g, self.t
        return [(n, ho0, min(t.rows, g.ho - ho0)) for n in range(g.n) for ho0 in range(0, g.ho, t.rows)]

    def input_rows(self, ho0, rows):
        return ho0 * self.g.sh, self.g.in_rows(rows)

    def load_band(self, copies, band):
        first, count = self.input_rows(band.ho0, band.rows)
        for j in range(self.g.kw):
            for slot in range(count):
                self.load_row(copies, band, j, slot, first + slot)

    def band_row(self, r, i):
        return r * self.g.sh + i * self.g.dh


@ns.kernel
def band_conv(x, ws, wz, const, y, g: ConvGeometry, t: ConvTiling, has_bias: bool, kernel_class,
              trace: dict | None = None) -> None:
    """NCHW ``y`` = conv2d of NCHW ``x`` by ``kernel_class`` (a :class:`BandConv` subclass); ``trace``
    (a dict) records the kernel's bands ("bands"), the rows each copy-in loaded ("loads": a list of
    (band, [(j, slot, row), ...])) and each band's reads ("reads": (r, i) -> slot)."""
    k = kernel_class(x, ws, wz, const, y, g, t, has_bias)
    k.trace = trace
    k.process()


def _rowwise_const(g: ConvGeometry, b) -> np.ndarray:
    bias = b if b is not None else np.zeros(g.cout, dtype=dtype_of(g.dtype))
    return np.concatenate([host.bias_column_zz(bias, g), host.ones_fractal(g)])


def band_conv_args(kernel_class, x, w, bias=None, stride=1, padding=0, dilation=1, *, out_dtype=None,
                   tiling: ConvTiling | None = None, config=None, block_dim: int = 1,
                   trace: dict | None = None) -> tuple:
    """Everything :func:`band_conv` is launched with, prepared on the host: ``(args, geometry, tiling)``.
    ``args`` = ``(x, ws, wz, const, y, g, t, has_bias, kernel_class, trace)``; ``y`` is filled with NaN."""
    cfg, x, g, t, b = prepare(kernel_class, BandConv, "reuse", x, w, bias, stride, padding, dilation, out_dtype,
                              tiling, config)
    wz = host.fractal_z_weights(w, g)
    ws = np.empty(workspace_shape(g, block_dim), dtype=x.dtype)
    y = np.full((g.n, g.cout, g.ho, g.wo), np.nan, dtype=dtype_of(g.out_dtype))
    return (x, ws, wz, _rowwise_const(g, b), y, g, t, b is not None, kernel_class, trace), g, t


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


def band_reads_figure(g: ConvGeometry, rows: int, bands: int = 2):
    """A picture of which padded input rows the output rows of the first ``bands`` bands (``rows`` output
    rows each) read, one marker per height tap: what exercise 1 turns into loads and slots."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 0.45 * min(g.ho, bands * rows) + 1.2), dpi=80)
    ax = fig.subplots()
    last = 0
    for b in range(bands):
        for r in range(rows):
            ho = b * rows + r
            if ho >= g.ho:
                break
            read = [ho * g.sh + i * g.dh for i in range(g.kh)]
            last = max(last, read[-1])
            ax.plot(read, [ho] * g.kh, "-", color=f"C{b}", lw=1, alpha=0.5)
            for i, row in enumerate(read):
                ax.text(row, ho, str(i), ha="center", va="center", fontsize=8, color="white",
                        bbox=dict(boxstyle="circle,pad=0.25", fc=f"C{b}", ec="none"))
    ax.set_xlim(-0.7, last + 0.7)
    ax.set_ylim(min(g.ho, bands * rows) - 0.5, -0.5)
    ax.set_xticks(range(0, last + 1))
    ax.set_xlabel("padded input row (numbers in the circles: height tap i)")
    ax.set_ylabel("output row")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{g.kh}x{g.kw} kernel, stride {g.sh}, dilation {g.dh}: the input rows each output row reads "
                 f"(one colour per band of {rows} output rows)", fontsize=9)
    fig.tight_layout()
    return fig


__all__ = ["Band", "BandConv", "ReferenceBand", "band_conv", "band_conv_args", "run_band_conv", "band_reads_figure"]
