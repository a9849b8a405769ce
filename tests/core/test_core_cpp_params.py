"""Parameter structs in the C++ brace order (#27 item 3): DataCopyExtParams, MmadParams, FixpipeParamsV220."""

from __future__ import annotations

import numpy as np
import pytest

import npusim as ns

H = ns.HardEvent


def test_data_copy_ext_params_takes_five_values():
    p = ns.DataCopyExtParams(2, 64, 0, 0, 0)
    assert (p.block_count, p.block_len, p.rsv) == (2, 64, 0)


@pytest.mark.parametrize("values, accumulate", [((), False), ((False,), False), ((True,), True),
                                                ((False, 0, False, False, False), False),
                                                ((0, False, True), False), ((0, False, False), True)])
def test_mmad_params_constructors_mean_what_cpp_means(values, accumulate):
    p = ns.MmadParams(16, 16, 16, *values)
    assert p.accumulate is accumulate
    assert ns.MmadParams(16, 16, 16, cmatrix_init_val=False).accumulate   # the labs' keyword still works


def test_mmad_params_rejects_a_count_no_constructor_has():
    with pytest.raises(ns.UsageError, match="3, 6 or 8 values"):
        ns.MmadParams(16, 16, 16, 1, 2, 3, 4, 5, 6)


@ns.kernel
def cube(a, b, bias, c, m, n, k, nd, mode):
    """nd matmuls of m x k by k x n, drained by one FixpipeParamsV220 with nd_num = nd."""
    pipe = ns.TPipe()
    l1a, l1b, l1bias = ns.TBuf(ns.TPosition.A1), ns.TBuf(ns.TPosition.B1), ns.TBuf(ns.TPosition.B1)
    l0a, l0b, l0c = ns.TBuf(ns.TPosition.A2), ns.TBuf(ns.TPosition.B2), ns.TBuf(ns.TPosition.CO1)
    for buf, size in ((l1a, a.size * 2), (l1b, b.size * 2), (l1bias, 64 * 4), (l0a, a.size * 2), (l0b, b.size * 2),
                      (l0c, nd * 16 * n * 4 * -(-m // 16))):
        pipe.init_buffer(buf, size)
    ns.data_copy(l1a.get(ns.float16), a, a.size)
    ns.data_copy(l1b.get(ns.float16), b, b.size)
    ns.data_copy(l1bias.get(ns.float32), bias, 64)
    ns.set_flag(H.MTE2_MTE1, 0)
    ns.wait_flag(H.MTE2_MTE1, 0)
    fa, fb = a.size * 2 // 512, b.size * 2 // 512
    ns.load_data(l0a.get(ns.float16), l1a.get(ns.float16), ns.LoadData2DParams(0, fa, 1, 0, 0, False, 0))
    ns.load_data(l0b.get(ns.float16), l1b.get(ns.float16), ns.LoadData2DParams(0, fb, 1, 0, 0, False, 0))
    ns.set_flag(H.MTE1_M, 0)
    ns.wait_flag(H.MTE1_M, 0)
    out = l0c.get(ns.float32)
    per = -(-m // 16) * 16 * n
    for i in range(nd):
        if mode == "bias":
            ns.mmad(out[i * per:], l0a.get(ns.float16), l0b.get(ns.float16), l1bias.get(ns.float32),
                    ns.MmadParams(m, n, k, 0, False, True))
        else:
            ns.mmad(out[i * per:], l0a.get(ns.float16), l0b.get(ns.float16), ns.MmadParams(m, n, k, False))
            if mode == "twice":   # isBias = true: C += A @ B
                ns.mmad(out[i * per:], l0a.get(ns.float16), l0b.get(ns.float16), ns.MmadParams(m, n, k, True))
    ns.set_flag(H.M_FIX, 0)
    ns.wait_flag(H.M_FIX, 0)
    ns.fixpipe(c, out, ns.FixpipeParamsV220(n, m, -(-m // 16) * 16, n, False, ns.QuantMode.NoQuant, 0, nd,
                                            per // 256, m * n, 0), ns.CFG_ROW_MAJOR)


@pytest.mark.parametrize("mode, factor", [("once", 1), ("twice", 2), ("bias", 1)])
def test_mmad_and_fixpipe_v220_with_nd_batching(mode, factor):
    m = n = k = 16
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    bias = rng.standard_normal(64).astype(np.float32)
    c = np.zeros((2, m, n), np.float32)
    # L0A takes A as ZZ fractals, L0B takes B as ZN: for 16 x 16 both are one fractal (B transposed)
    ns.launch(cube, 1, a.copy(), np.ascontiguousarray(b.T), bias, c, m, n, k, 2, mode)
    want = factor * (a.astype(np.float32) @ b.astype(np.float32))
    if mode == "bias":
        want = want + bias[:n]
    np.testing.assert_allclose(c, np.broadcast_to(want, c.shape), rtol=1e-3, atol=1e-3)


def test_fixpipe_nz_output_is_refused_with_a_hint():
    with pytest.raises(ns.UsageError, match="CFG_ROW_MAJOR"):
        ns.launch(_nz_kernel, 1, np.zeros((16, 16), np.float32))


@ns.kernel
def _nz_kernel(c):
    pipe = ns.TPipe()
    l0c = ns.TBuf(ns.TPosition.CO1)
    pipe.init_buffer(l0c, 1024)
    ns.fixpipe(c, l0c.get(ns.float32), ns.FixpipeParamsV220(16, 16, 16, 16), ns.CFG_NZ)
