"""``npusim bench`` cases of the simulator core: (a) vector add and (b) matmul, one block each."""

from __future__ import annotations

import numpy as np

from . import case, line, measure


@case("vector_add")
def bench_vector_add(repeat: int) -> dict:
    """(a) vector add, 1,048,576 fp16 elements, 4096-element tiles, double-buffered, one block."""
    from ..kernels.vector_add import run_vector_add

    n, tile = 1 << 20, 4096
    rng = np.random.default_rng(0)
    x = rng.random(n).astype(np.float16)
    y = rng.random(n).astype(np.float16)
    z = np.empty_like(x)
    bx, by, bz = (np.empty(tile, np.float16) for _ in range(3))

    def floor():
        for off in range(0, n, tile):
            np.copyto(bx, x[off:off + tile])
            np.copyto(by, y[off:off + tile])
            np.add(bx, by, out=bz)
            np.copyto(z[off:off + tile], bz)

    sim_s, np_s, res = measure(lambda: run_vector_add(x, y, tile=tile, buffer_num=2), floor, repeat)
    assert np.array_equal(res["z"], x + y)
    return line("vector_add", sim_s, np_s, res.profile, elements=n, tile=tile, target_sim_s=0.020,
                target_ratio=3.0)


@case("matmul")
def bench_matmul(repeat: int) -> dict:
    """(b) matmul 256 x 256 x 256, fp16 -> fp32, 64 x 64 x 64 base blocks, one block."""
    from ..kernels.matmul import MatmulTiling, run_matmul

    m = n = k = 256
    bs = 64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.empty((m, n), np.float32)

    def floor():
        for i in range(0, m, bs):
            for j in range(0, n, bs):
                acc = np.zeros((bs, bs), np.float32)
                for kk in range(0, k, bs):
                    acc += a[i:i + bs, kk:kk + bs].astype(np.float32) @ b[kk:kk + bs, j:j + bs].astype(np.float32)
                c[i:i + bs, j:j + bs] = acc

    tiling = MatmulTiling(bs, bs, bs, 2)
    sim_s, np_s, res = measure(lambda: run_matmul(a, b, tiling=tiling), floor, repeat)
    assert np.allclose(res["c"], a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
    return line("matmul", sim_s, np_s, res.profile, shape=[m, n, k], base_block=[bs, bs, bs],
                mac_utilization=round(res.profile.mac_utilization, 4), target_sim_s=0.020, target_ratio=5.0)
