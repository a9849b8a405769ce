"""The host side of the Matmul API: ``TCubeTiling`` and ``matmul_tiling::MultiCoreMatmulTiling`` [S3 Matmul
Tiling; asc-devkit ``examples/.../matmul_high_level_api``].

``get_tiling`` splits C over up to ``set_dim`` cores (a grid of ``singleCoreM x singleCoreN`` regions), then
each region into base blocks of at most 128 x 128 with ``baseK`` 64 (fp16) that fit L0A/L0B/L0C twice,
as the sample's tiling does for its shapes; the choice is npusim's (CANN's search is not public).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import get_config
from ..errors import UsageError


@dataclass
class TCubeTiling:
    """The tiling fields kernels read (C++ ``TCubeTiling``, camelCase kept as in kernels)."""

    usedCoreNum: int = 1
    M: int = 0
    N: int = 0
    Ka: int = 0
    Kb: int = 0
    singleCoreM: int = 0
    singleCoreN: int = 0
    singleCoreK: int = 0
    baseM: int = 0
    baseN: int = 0
    baseK: int = 0
    depthA1: int = 1
    depthB1: int = 1
    stepM: int = 1
    stepN: int = 1
    stepKa: int = 1
    stepKb: int = 1
    isBias: int = 0


class PlatformAscendC:
    """``platform_ascendc::PlatformAscendC`` for a preset: core counts and memory sizes."""

    def __init__(self, config="a2"):
        self.cfg = get_config(config)

    def get_core_num_aic(self) -> int:
        return self.cfg.num_cores

    def get_core_mem_size(self, memory: str) -> int:
        return self.cfg.memory_bytes(memory)


def _round16(x: int) -> int:
    return -(-x // 16) * 16


class MultiCoreMatmulTiling:
    """``matmul_tiling::MultiCoreMatmulTiling``: set the shapes and types, then ``get_tiling(tiling)``."""

    def __init__(self, platform: PlatformAscendC | None = None):
        self.platform = platform or PlatformAscendC()
        self.dim = self.platform.get_core_num_aic()
        self.m = self.n = self.k = 0
        self.bias = False
        self.a_dtype = np.dtype(np.float16)

    def set_dim(self, dim: int) -> None:
        self.dim = int(dim)

    def set_a_type(self, position, fmt, dtype, is_trans: bool = False) -> None:
        if is_trans:
            raise UsageError("a transposed A is not modelled by npusim's Matmul", hint="pass A as M x K (ND)")
        self.a_dtype = np.dtype(dtype)

    def set_b_type(self, position, fmt, dtype, is_trans: bool = False) -> None:
        if is_trans:
            raise UsageError("a transposed B is not modelled by npusim's Matmul", hint="pass B as K x N (ND)")

    def set_c_type(self, position, fmt, dtype) -> None:
        pass

    def set_org_shape(self, m: int, n: int, k: int, kb: int | None = None) -> None:
        self.m, self.n, self.k = int(m), int(n), int(k)

    def set_shape(self, m: int, n: int, k: int) -> None:
        self.set_org_shape(m, n, k)

    def set_bias(self, bias: bool) -> None:
        self.bias = bool(bias)

    def set_buffer_space(self, l1: int = -1, l0c: int = -1, ub: int = -1) -> None:
        pass

    def get_tiling(self, tiling: TCubeTiling) -> int:
        """Fill ``tiling``; 0 on success, -1 when a size is missing (as the C++ returns)."""
        m, n, k = self.m, self.n, self.k
        if min(m, n, k) < 1 or self.dim < 1:
            return -1
        best = None
        for mb in range(1, self.dim + 1):       # the grid of regions that keeps most cores busy, squarest first
            nb = self.dim // mb
            sm, sn = _round16(-(-m // mb)), _round16(-(-n // nb))
            used = -(-m // sm) * -(-n // sn)
            score = (-(sm * sn), abs(sm - sn))   # smallest region first: the most parallel grid
            if used <= self.dim and (best is None or score < best[0]):
                best = (score, sm, sn, used)
        _, sm, sn, used = best
        tiling.usedCoreNum, tiling.M, tiling.N, tiling.Ka, tiling.Kb = used, m, n, k, k
        tiling.singleCoreM, tiling.singleCoreN, tiling.singleCoreK = sm, sn, k
        tiling.baseM, tiling.baseN = min(128, sm), min(128, sn)
        tiling.baseK = min(64 * 2 // self.a_dtype.itemsize, -(-k // 16) * 16)
        tiling.isBias = int(self.bias)
        return 0
