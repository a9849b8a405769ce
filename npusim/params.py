"""Parameter records of the instructions, named after their Ascend C structs (snake_case fields).

They are NamedTuples: immutable, built with keywords, and cheap to create in a kernel's inner loop."""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple, Optional


class DataCopyParams(NamedTuple):
    """Blocked DataCopy between GM and UB/L1: ``block_count`` blocks of ``block_len`` 32 B units; the
    gaps between consecutive blocks are ``src_stride`` / ``dst_stride`` 32 B units [S2 DataCopy]."""

    block_count: int = 1
    block_len: int = 1
    src_stride: int = 0
    dst_stride: int = 0


class DataCopyExtParams(NamedTuple):
    """DataCopyPad: ``block_count`` blocks of ``block_len`` BYTES. The GM-side gap is in bytes, the UB-side
    gap in 32 B blocks (so ``src_stride`` is bytes when copying GM->UB, blocks when UB->GM). ``rsv`` is the
    C++ struct's reserved field (``{blockCount, blockLen, srcStride, dstStride, rsv}``), ignored [S2]."""

    block_count: int = 1
    block_len: int = 0
    src_stride: int = 0
    dst_stride: int = 0
    rsv: int = 0


class DataCopyPadExtParams(NamedTuple):
    """Padding of each UB block in DataCopyPad GM->UB: ``left_padding``/``right_padding`` elements (each
    <= 32 B) and the rest of the 32 B block; filled with ``padding_value`` when ``is_pad`` [S2]."""

    is_pad: bool = False
    left_padding: int = 0
    right_padding: int = 0
    padding_value: float = 0


class Nd2NzParams(NamedTuple):
    """DataCopy GM->L1 that turns an ND matrix of ``n_value`` rows x ``d_value`` columns into NZ fractals,
    fields in the C++ brace order ``{ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride,
    dstNzNStride, dstNzMatrixStride}``.

    ``src_d_value``: elements between row starts in GM (default ``d_value``). ``dst_nz_c0_stride``: rows
    between consecutive C0-column blocks in L1 (default ``n_value`` rounded up to 16). ``dst_nz_n_stride``:
    rows between consecutive rows in L1 (1; other values are not modelled). The padding of the last fractal
    row and C0 column is zero-filled. ``nd_num`` matrices, ``src_nd_matrix_stride`` elements apart in GM and
    ``dst_nz_matrix_stride`` elements apart in L1 [S2, S3 "FRACTAL_NZ"].
    """

    nd_num: int = 1
    n_value: int = 0
    d_value: int = 0
    src_nd_matrix_stride: int = 0
    src_d_value: Optional[int] = None
    dst_nz_c0_stride: Optional[int] = None
    dst_nz_n_stride: int = 1
    dst_nz_matrix_stride: int = 0


class LoadData2DParams(NamedTuple):
    """LoadData L1->L0A/L0B: ``repeat_times`` 512 B fractals, the i-th read from fractal
    ``start_index + i * src_stride`` of the source and written ``dst_gap`` fractals apart (plus itself).
    ``if_transpose`` transposes each 16x16 fractal (fp16/bf16), giving L0B its ZN layout. Fields in the C++
    brace order ``{startIndex, repeatTimes, srcStride, sid, dstGap, ifTranspose, addrMode}``; ``sid`` and
    ``addr_mode`` are accepted and ignored [S2 LoadData]."""

    start_index: int = 0
    repeat_times: int = 1
    src_stride: int = 1
    sid: int = 0
    dst_gap: int = 0
    if_transpose: bool = False
    addr_mode: int = 0


class LoadData3DParams(NamedTuple):
    """LoadData 3D (img2col) from an NC1HWC0 feature map in L1 (one image: C1 x H x W x C0) into L0A.

    The im2col matrix has one row per output position (``m = ho * Wo + wo``) and one column per
    ``k = ((c1 * kh + i) * kw + j) * C0 + c0``, the order of FRACTAL_Z weights. This loads rows
    ``[m_start, m_start + m_extension)`` and columns ``[k_start, k_start + k_extension)`` (multiples of
    16 and C0) as ZZ fractals. Windows outside the image read ``pad_value`` [S2 LoadData_3D].
    """

    l1_h: int
    l1_w: int
    channel_size: int
    kh: int
    kw: int
    m_extension: int
    k_extension: int
    m_start: int = 0
    k_start: int = 0
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1
    pad_top: int = 0
    pad_bottom: int = 0
    pad_left: int = 0
    pad_right: int = 0
    pad_value: float = 0

    @property
    def out_h(self) -> int:
        return (self.l1_h + self.pad_top + self.pad_bottom - self.dilation_h * (self.kh - 1) - 1) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        return (self.l1_w + self.pad_left + self.pad_right - self.dilation_w * (self.kw - 1) - 1) // self.stride_w + 1


class MmadParams:
    """Mmad sizes in elements (each <= 4095) and how C starts, with the C++ struct's two constructors
    (``include/basic_api/kernel_struct_mm.h`` in asc-devkit):

    - ``MmadParams(m, n, k, is_bias, fm_offset, en_ssparse, en_winograd_a, en_winograd_b)``: ``is_bias``
      True accumulates onto what L0C holds (C += A @ B), False computes C = A @ B;
    - ``MmadParams(m, n, k, unit_flag, cmatrix_source, cmatrix_init_val)`` (exactly six values):
      ``cmatrix_init_val`` True starts C from zero, False accumulates; ``cmatrix_source`` True takes the
      initial C from the bias table (the ``bias`` of :func:`npusim.mmad`).

    Every field is also a keyword and an attribute (``p = MmadParams(); p.m = 16``, as in C++). C accumulates
    when ``is_bias`` is set or ``cmatrix_init_val`` is False.
    """

    __slots__ = ("m", "n", "k", "is_bias", "fm_offset", "en_ssparse", "en_winograd_a", "en_winograd_b",
                 "unit_flag", "k_direction_align", "cmatrix_source", "cmatrix_init_val")
    _LONG = ("is_bias", "fm_offset", "en_ssparse", "en_winograd_a", "en_winograd_b")
    _SHORT = ("unit_flag", "cmatrix_source", "cmatrix_init_val")

    def __init__(self, m: int = 0, n: int = 0, k: int = 0, *values, is_bias: bool = False, fm_offset: int = 0,
                 en_ssparse: bool = False, en_winograd_a: bool = False, en_winograd_b: bool = False,
                 unit_flag: int = 0, k_direction_align: bool = False, cmatrix_source: bool = False,
                 cmatrix_init_val: bool = True):
        self.m, self.n, self.k = m, n, k
        self.is_bias, self.fm_offset, self.en_ssparse = is_bias, fm_offset, en_ssparse
        self.en_winograd_a, self.en_winograd_b, self.unit_flag = en_winograd_a, en_winograd_b, unit_flag
        self.k_direction_align, self.cmatrix_source, self.cmatrix_init_val = (k_direction_align, cmatrix_source,
                                                                              cmatrix_init_val)
        names = self._SHORT if len(values) == 3 else self._LONG
        if len(values) > 5:
            from .errors import UsageError

            raise UsageError(f"MmadParams takes 3, 6 or 8 values, got {3 + len(values)}",
                             hint="MmadParams(m, n, k, isBias, fmOffset, enSsparse, enWinogradA, enWinogradB) or "
                                  "MmadParams(m, n, k, unitFlag, cmatrixSource, cmatrixInitVal), as in C++")
        for name, v in zip(names, values):
            setattr(self, name, v)

    @property
    def accumulate(self) -> bool:
        """C += A @ B (onto L0C, or onto the bias with ``cmatrix_source``) rather than C = A @ B."""
        return bool(self.is_bias) or not self.cmatrix_init_val

    def __repr__(self) -> str:
        return "MmadParams(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__) + ")"

    def __eq__(self, other) -> bool:
        return isinstance(other, MmadParams) and all(getattr(self, f) == getattr(other, f) for f in self.__slots__)


class FixpipeParams(NamedTuple):
    """Fixpipe L0C (NZ) -> GM (ND): an ``m`` x ``n`` result, ``src_stride`` = rows of the NZ source
    (default ``m`` rounded up to 16), ``dst_stride`` = elements between row starts in GM (default ``n``).
    On the way: ``deq_scale`` (a float, or an L1 float32 tensor of ``n`` per-channel scales) for int32
    results, a cast to the destination dtype (round to nearest even), then ``relu`` [S1 Fixpipe]."""

    m: int
    n: int
    src_stride: Optional[int] = None
    dst_stride: Optional[int] = None
    relu: bool = False
    deq_scale: object = None


class CO2Layout(Enum):
    """Layout Fixpipe writes: NZ fractals as in L0C, or ND rows (ROW_MAJOR) [S2 Fixpipe]."""

    NZ = 0
    ROW_MAJOR = 1
    COLUMN_MAJOR = 2


CFG_NZ, CFG_ROW_MAJOR, CFG_COLUMN_MAJOR = CO2Layout.NZ, CO2Layout.ROW_MAJOR, CO2Layout.COLUMN_MAJOR


class QuantMode(Enum):
    """Fixpipe's ``quantPre``: the conversion on the way out of L0C (QuantMode_t) [S2 Fixpipe]."""

    NoQuant = 0
    F322F16 = 1
    F322BF16 = 2
    DEQF16 = 3       # int32 * deqScalar -> half
    VDEQF16 = 4      # int32 * per-channel scales -> half
    REQ8 = 5
    VREQ8 = 6


class FixpipeParamsV220(NamedTuple):
    """Fixpipe L0C -> GM on A2, in the C++ constructor's order (5 or 11 values): an ``m_size`` x ``n_size``
    NZ result (``src_stride`` rows between its 16-column blocks, m rounded up to 16) written as ND rows
    ``dst_stride`` elements apart, with ReLU, a conversion ``quant_pre`` (the output dtype decides it; a
    ``deq_scalar`` multiplies int32 results) and ``nd_num`` such matrices, ``src_nd_stride`` fractals
    (16 x 16 elements) apart in L0C and ``dst_nd_stride`` elements apart in GM [S2 Fixpipe]."""

    n_size: int
    m_size: int
    src_stride: int = 0
    dst_stride: int = 0
    relu_en: bool = False
    quant_pre: QuantMode = QuantMode.NoQuant
    deq_scalar: float = 0
    nd_num: int = 1
    src_nd_stride: int = 0
    dst_nd_stride: int = 0
    unit_flag: int = 0
