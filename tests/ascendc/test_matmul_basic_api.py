"""A Cube matmul with LoadData / Mmad / Fixpipe, transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/01_simd_cpp_api/00_introduction/02_matrix/matmul_basic_api/matmul_basic_api.asc
(commit 43048e9acec5717ce95b2f0096c4b5e92f7df94a). The ``__NPU_ARCH__ == 2201`` (A2) branch.
"""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

pytestmark = pytest.mark.ascendc

CUBE_BLOCK = 16


@ns.kernel
def mmad_custom(a, b, c, M, K, N, singleCoreM, baseM, baseK, baseN):
    ns.init_soc_state()
    mIterIdx = ns.get_block_idx() % (M // singleCoreM)
    aGM = a[mIterIdx * singleCoreM * K:]
    bGM = b
    cGM = c[mIterIdx * singleCoreM * N:]
    l1Allocator = ns.LocalMemAllocator(ns.Hardware.L1)
    l0aAllocator = ns.LocalMemAllocator(ns.Hardware.L0A)
    l0bAllocator = ns.LocalMemAllocator(ns.Hardware.L0B)
    l0cAllocator = ns.LocalMemAllocator(ns.Hardware.L0C)
    a1Local = l1Allocator.alloc(ns.TPosition.A1, ns.float16, baseM * baseK)
    b1Local = l1Allocator.alloc(ns.TPosition.B1, ns.float16, baseK * baseN)
    a2Local = l0aAllocator.alloc(ns.TPosition.A2, ns.float16, baseM * baseK)
    b2Local = l0bAllocator.alloc(ns.TPosition.B2, ns.float16, baseK * baseN)
    cLocal = l0cAllocator.alloc(ns.TPosition.CO1, ns.float32, baseM * baseN)
    ns.data_copy(a1Local, aGM, ns.Nd2NzParams(1, baseM, baseK, 0, K, baseM, 1, 0))
    ns.data_copy(b1Local, bGM, ns.Nd2NzParams(1, baseK, baseN, 0, N, baseK, 1, 0))
    ns.set_flag(ns.HardEvent.MTE2_MTE1, 0)
    ns.wait_flag(ns.HardEvent.MTE2_MTE1, 0)
    for i in range(baseM // CUBE_BLOCK):
        ns.load_data(a2Local[i * baseK * CUBE_BLOCK:], a1Local[i * 512 // 2:],
                     ns.LoadData2DParams(0, baseK // CUBE_BLOCK, baseM // CUBE_BLOCK, 0, 0, False, 0))
    for i in range(baseK // CUBE_BLOCK):
        ns.load_data(b2Local[i * baseN * CUBE_BLOCK:], b1Local[i * 512 // 2:],
                     ns.LoadData2DParams(0, baseN // CUBE_BLOCK, baseK // CUBE_BLOCK, 0, 0, True, 0))
    ns.set_flag(ns.HardEvent.MTE1_M, 0)
    ns.wait_flag(ns.HardEvent.MTE1_M, 0)
    ns.mmad(cLocal, a2Local, b2Local, ns.MmadParams(baseM, baseN, baseK, 0, False, True))
    ns.set_flag(ns.HardEvent.M_FIX, 0)
    ns.wait_flag(ns.HardEvent.M_FIX, 0)
    ns.fixpipe(cGM, cLocal, ns.FixpipeParamsV220(baseN, baseM, baseM, N, False, ns.QuantMode.F322F16, 0, 1, 0, 0, 0))
    ns.pipe_barrier(ns.Pipe.ALL)


def test_matmul_basic_api_matches_numpy():
    M, K, N, singleCoreM, baseM, baseK, baseN = 256, 64, 256, 128, 128, 64, 256
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    numBlocks = 2
    ns.launch(mmad_custom, numBlocks, a, b, c, M, K, N, singleCoreM, baseM, baseK, baseN)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-3, atol=2e-3)
