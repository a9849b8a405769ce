"""The shape arithmetic of one Conv2D, computed once on the host and handed to every kernel.

A convolution is described by its NCHW input ``(N, Cin, H, W)``, its ``(Cout, Cin, Kh, Kw)`` weights and
``stride``, ``padding`` and ``dilation`` (an int, or an ``(h, w)`` pair, as in torch). Everything a kernel
needs (output size, channel blocks of C0 = 32 B / element size, the input rows one band of output rows
reads) is a property here, so the kernels only do index arithmetic with names that say what they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import npusim as ns

#: input dtype -> output dtypes the Cube path can produce (through an fp32/int32 accumulator)
OUT_DTYPES = {
    "float16": ("float16", "float32"),
    "bfloat16": ("bfloat16", "float32"),
    "float32": ("float32",),
    "int8": ("int32",),
}

#: input dtype -> output dtypes when the drain dequantises the accumulator (int32 x fp32 scale, in Fixpipe)
DEQUANT_OUT_DTYPES = {"int8": ("float16", "float32")}


DTYPES = {"float16": ns.float16, "bfloat16": ns.bfloat16, "float32": ns.float32, "int8": ns.int8, "int32": ns.int32}
"""Element types by name (numpy dtypes; bfloat16 from ml_dtypes, as npusim exports it)."""


def dtype_of(name: str) -> np.dtype:
    """The numpy dtype of an element type name."""
    return DTYPES[name]


def name_of(dtype) -> str:
    """The name of a dtype-like (``np.float16``, ``"float16"``, ``ns.bfloat16``)."""
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


def pair(v, what: str) -> tuple[int, int]:
    """``3`` -> ``(3, 3)``; ``(1, 2)`` stays; anything else is a UsageError."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v), int(v)
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(e, (int, np.integer)) for e in v):
        return int(v[0]), int(v[1])
    raise ns.UsageError(f"conv2d: {what} must be an int or a pair of ints, not {v!r}")


@dataclass(frozen=True)
class ConvGeometry:
    """Sizes of one convolution. Build it with :meth:`of`."""

    n: int
    cin: int
    h: int
    w: int
    cout: int
    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 1
    dw: int = 1
    dtype: str = "float16"
    out_dtype: str = "float16"

    @classmethod
    def of(cls, x_shape, w_shape, stride=1, padding=0, dilation=1, dtype="float16",
           out_dtype: str | None = None, dequant: bool = False) -> "ConvGeometry":
        """Check the shapes and arguments of ``conv2d(x, w, ...)`` and derive the geometry. ``dequant``: the
        int32 accumulator of int8 inputs is dequantised to a float output (float16 by default)."""
        if len(x_shape) != 4 or len(w_shape) != 4:
            raise ns.UsageError(f"conv2d needs an NCHW input and (Cout, Cin, Kh, Kw) weights, got shapes "
                                f"{tuple(x_shape)} and {tuple(w_shape)}")
        n, cin, h, w = (int(v) for v in x_shape)
        cout, cin_w, kh, kw = (int(v) for v in w_shape)
        if cin != cin_w:
            raise ns.UsageError(f"conv2d: the input has {cin} channels but the weights expect {cin_w}")
        if min(n, cin, h, w, cout, kh, kw) < 1:
            raise ns.UsageError(f"conv2d: every size must be >= 1, got input {tuple(x_shape)}, "
                                f"weights {tuple(w_shape)}")
        (sh, sw), (ph, pw), (dh, dw) = pair(stride, "stride"), pair(padding, "padding"), pair(dilation, "dilation")
        if min(sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
            raise ns.UsageError("conv2d: stride and dilation must be >= 1 and padding >= 0")
        dtype = name_of(dtype)
        if dtype not in OUT_DTYPES:
            raise ns.DtypeError(f"conv2d takes {', '.join(OUT_DTYPES)} inputs, not {dtype}")
        if dequant and dtype not in DEQUANT_OUT_DTYPES:
            raise ns.DtypeError(f"conv2d: dequantisation scales are for int8 inputs (int32 accumulator), not "
                                f"{dtype}")
        outs = DEQUANT_OUT_DTYPES[dtype] if dequant else OUT_DTYPES[dtype]
        out_dtype = name_of(out_dtype) if out_dtype is not None else outs[0]
        if out_dtype not in outs:
            raise ns.DtypeError(f"conv2d: {dtype} inputs give {' or '.join(outs)} outputs "
                                f"(through the {'int32' if dtype == 'int8' else 'fp32'} accumulator"
                                f"{', dequantised' if dequant else ''}), not {out_dtype}"
                                + (" (float16 needs a dequantisation scale: deq_scale=...)"
                                   if dtype == "int8" and not dequant else ""))
        g = cls(n, cin, h, w, cout, kh, kw, sh, sw, ph, pw, dh, dw, dtype, out_dtype)
        if g.ho < 1 or g.wo < 1:
            raise ns.UsageError(f"conv2d: the {kh}x{kw} kernel (dilation {dh}x{dw}) does not fit the "
                                f"{h}x{w} input padded by {ph}x{pw}: the output would be {g.ho}x{g.wo}")
        return g

    # --- element types -------------------------------------------------------------------------
    @property
    def isz(self) -> int:
        """Bytes per input element."""
        return DTYPES[self.dtype].itemsize

    @property
    def osz(self) -> int:
        """Bytes per output element."""
        return DTYPES[self.out_dtype].itemsize

    @property
    def acc_dtype(self) -> str:
        """The L0C accumulator: int32 for int8 inputs, else float32."""
        return "int32" if self.dtype == "int8" else "float32"

    @property
    def c0(self) -> int:
        """C0 = K0 = 32 B / element size: channels per NC1HWC0 block and per fractal row."""
        return 32 // self.isz

    # --- output --------------------------------------------------------------------------------
    @property
    def ho(self) -> int:
        return (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1

    @property
    def wo(self) -> int:
        return (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1

    # --- channel blocks ------------------------------------------------------------------------
    @property
    def c1(self) -> int:
        """Input channel blocks of C0 (the last one zero-padded)."""
        return -(-self.cin // self.c0)

    @property
    def kk(self) -> int:
        """Taps of the kernel window, Kh * Kw."""
        return self.kh * self.kw

    @property
    def n1(self) -> int:
        """Output channel blocks of 16 (the N of the Cube's fractals)."""
        return -(-self.cout // 16)

    @property
    def k1(self) -> int:
        """Fractal rows of FRACTAL_Z weights: C1 * Kh * Kw."""
        return self.c1 * self.kk

    # --- input rows --------------------------------------------------------------------------------
    @property
    def hp(self) -> int:
        """Input rows with the padding."""
        return self.h + 2 * self.ph

    @property
    def wp(self) -> int:
        """Input columns with the padding."""
        return self.w + 2 * self.pw

    def in_rows(self, out_rows: int) -> int:
        """Input rows (padded coordinates) that ``out_rows`` consecutive output rows read."""
        return (out_rows - 1) * self.sh + (self.kh - 1) * self.dh + 1

    def tap(self, t: int) -> tuple[int, int]:
        """Tap ``t`` of the window as ``(i, j)``, row-major like the weights."""
        return divmod(t, self.kw)

    # --- work ------------------------------------------------------------------------------------
    @property
    def macs(self) -> int:
        """Useful multiply-accumulates of the whole convolution."""
        return self.n * self.cout * self.ho * self.wo * self.cin * self.kk

    def describe(self) -> str:
        s = f"{self.n}x{self.cin}x{self.h}x{self.w} -> {self.cout}, {self.kh}x{self.kw}"
        if (self.sh, self.sw) != (1, 1):
            s += f" stride {self.sh}x{self.sw}"
        if (self.ph, self.pw) != (0, 0):
            s += f" pad {self.ph}x{self.pw}"
        if (self.dh, self.dw) != (1, 1):
            s += f" dilation {self.dh}x{self.dw}"
        return s + f" ({self.dtype} -> {self.out_dtype})"


def work_items(g: ConvGeometry, band_rows: int) -> list[tuple[int, int, int]]:
    """The bands of output rows, ``(image, first output row, rows)``, in the order blocks take them."""
    return [(b, r, min(band_rows, g.ho - r)) for b in range(g.n) for r in range(0, g.ho, band_rows)]


def my_items(items: list) -> list:
    """This block's share of ``items``: every ``get_block_num()``-th one from ``get_block_idx()``."""
    return items[ns.get_block_idx()::ns.get_block_num()]
