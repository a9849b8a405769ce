"""The Matmul high-level API with a multi-core host tiling, transliterated call by call.

Source: cannmirror/asc-devkit (mirror of gitcode cann/asc-devkit),
examples/01_simd_cpp_api/00_introduction/02_matrix/matmul_high_level_api/matmul.asc
(commit 2f489ead56fe51cc17864d603bc386dd262bb657). The tiling reaches the kernel as a TCubeTiling object
(the C++ copies it through GM word by word: CopyTiling).
"""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns
from npusim.highlevel import (CubeFormat, Matmul, MatmulType, MultiCoreMatmulTiling, PlatformAscendC, TCubeTiling,
                              regist_matmul_obj)

pytestmark = pytest.mark.ascendc
TPosition = ns.TPosition


def Ceiling(a, b):
    return (a + b - 1) // b


def CalcGMOffset(blockIdx, tiling, isTransA, isTransB):
    mSingleBlocks = Ceiling(tiling.M, tiling.singleCoreM)
    mCoreIndx = blockIdx % mSingleBlocks
    nCoreIndx = blockIdx // mSingleBlocks
    offsetA = mCoreIndx * tiling.Ka * tiling.singleCoreM
    if isTransA:
        offsetA = mCoreIndx * tiling.singleCoreM
    offsetB = nCoreIndx * tiling.singleCoreN
    if isTransB:
        offsetB = nCoreIndx * tiling.Kb * tiling.singleCoreN
    offsetC = mCoreIndx * tiling.N * tiling.singleCoreM + nCoreIndx * tiling.singleCoreN
    tailM = tiling.M - mCoreIndx * tiling.singleCoreM
    tailM = tailM if tailM < tiling.singleCoreM else tiling.singleCoreM
    tailN = tiling.N - nCoreIndx * tiling.singleCoreN
    tailN = tailN if tailN < tiling.singleCoreN else tiling.singleCoreN
    return offsetA, offsetB, offsetC, tailM, tailN


@ns.kernel
def matmul_custom(a, b, c, workspace, tiling: TCubeTiling):
    A_T, B_T, C_T = ns.float16, ns.float16, ns.float32
    pipe = ns.TPipe()
    aGlobal, bGlobal, cGlobal = a, b, c
    isTransA = False
    isTransB = False
    offsetA, offsetB, offsetC, tailM, tailN = CalcGMOffset(ns.get_block_idx(), tiling, isTransA, isTransB)
    gmA = aGlobal[offsetA:]
    gmB = bGlobal[offsetB:]
    gmC = cGlobal[offsetC:]
    mm = Matmul(MatmulType(TPosition.GM, CubeFormat.ND, A_T), MatmulType(TPosition.GM, CubeFormat.ND, B_T),
                MatmulType(TPosition.GM, CubeFormat.ND, C_T))
    regist_matmul_obj(pipe, workspace, mm, tiling)
    if ns.get_block_idx() >= tiling.usedCoreNum:
        return
    mm.set_org_shape(tiling.M, tiling.N, tiling.Ka, tiling.Kb)
    mm.set_tensor_a(gmA, isTransA)
    mm.set_tensor_b(gmB, isTransB)
    mm.set_tail(tailM, tailN)
    mm.iterate_all(gmC)
    mm.end()


def GenerateTiling(ascendcPlatform, M, N, K):
    tilingData = TCubeTiling()
    tilingApi = MultiCoreMatmulTiling(ascendcPlatform)
    tilingApi.set_dim(ascendcPlatform.get_core_num_aic())
    tilingApi.set_a_type(TPosition.GM, CubeFormat.ND, np.float16, False)
    tilingApi.set_b_type(TPosition.GM, CubeFormat.ND, np.float16, False)
    tilingApi.set_c_type(TPosition.GM, CubeFormat.ND, np.float32)
    tilingApi.set_org_shape(M, N, K)
    tilingApi.set_shape(M, N, K)
    tilingApi.set_bias(False)
    tilingApi.set_buffer_space(-1, -1, -1)
    res = tilingApi.get_tiling(tilingData)
    assert res != -1, "gen tiling failed"
    return tilingData


@pytest.mark.slow
def test_matmul_high_level_api_matches_numpy():
    M, N, K = 512, 1024, 512   # the sample's shapes
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    tiling = GenerateTiling(PlatformAscendC("a2"), M, N, K)
    numBlocks = tiling.usedCoreNum
    assert 1 < numBlocks <= 24
    ns.launch(matmul_custom, numBlocks, a, b, c, None, tiling)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)


def test_matmul_api_with_tails_iterate_and_bias():
    """A shape that leaves tails, driven by iterate/get_tensor_c, with set_bias (the API's other calls)."""
    M, N, K = 200, 72, 96
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    api = MultiCoreMatmulTiling(PlatformAscendC("a2"))
    api.set_dim(4)
    api.set_org_shape(M, N, K)
    api.set_bias(True)
    tiling = TCubeTiling()
    assert api.get_tiling(tiling) == 0

    @ns.kernel
    def k(a, b, bias, c, tiling):
        pipe = ns.TPipe()
        offA, offB, offC, tailM, tailN = CalcGMOffset(ns.get_block_idx(), tiling, False, False)
        mm = Matmul(MatmulType(TPosition.GM, CubeFormat.ND, ns.float16), MatmulType(TPosition.GM, CubeFormat.ND,
                    ns.float16), MatmulType(TPosition.GM, CubeFormat.ND, ns.float32))
        regist_matmul_obj(pipe, None, mm, tiling)
        mm.set_tensor_a(a[offA:])
        mm.set_tensor_b(b[offB:])
        mm.set_bias(bias[offB:])
        mm.set_tail(tailM, tailN)
        while mm.iterate():
            mm.get_tensor_c(c[offC:])
        mm.end()

    ns.launch(k, tiling.usedCoreNum, a, b, bias, c, tiling)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32) + bias, rtol=1e-3, atol=1e-3)
