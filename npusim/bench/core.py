"""``npusim bench`` cases of the simulator core: (a) vector add and (b) matmul, one block each."""

from __future__ import annotations

import numpy as np

from . import case, line, measure

VECTOR_ADD = dict(n=1 << 20, tile=4096, buffer_num=2)
MATMUL = dict(size=256, block=64, buffer_num=2)


def vector_add_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The two fp16 vectors of case (a)."""
    rng = np.random.default_rng(0)
    return tuple(rng.random(VECTOR_ADD["n"]).astype(np.float16) for _ in range(2))


def simulate_vector_add(x: np.ndarray, y: np.ndarray):
    """Case (a)'s launch: numerics, timing and sanitizer on."""
    from ..kernels.vector_add import run_vector_add

    return run_vector_add(x, y, tile=VECTOR_ADD["tile"], buffer_num=VECTOR_ADD["buffer_num"])


def matmul_inputs() -> tuple[np.ndarray, np.ndarray]:
    """A and B of case (b), fp16."""
    rng = np.random.default_rng(0)
    s = MATMUL["size"]
    return tuple(rng.standard_normal((s, s)).astype(np.float16) for _ in range(2))


def simulate_matmul(a: np.ndarray, b: np.ndarray):
    """Case (b)'s launch."""
    from ..kernels.matmul import MatmulTiling, run_matmul

    bs = MATMUL["block"]
    return run_matmul(a, b, tiling=MatmulTiling(bs, bs, bs, MATMUL["buffer_num"]))


@case("vector_add")
def bench_vector_add(repeat: int) -> dict:
    """(a) vector add, 1,048,576 fp16 elements, 4096-element tiles, double-buffered, one block."""
    x, y = vector_add_inputs()
    n, tile = VECTOR_ADD["n"], VECTOR_ADD["tile"]
    z = np.empty_like(x)
    bx, by, bz = (np.empty(tile, np.float16) for _ in range(3))

    def floor():
        for off in range(0, n, tile):
            np.copyto(bx, x[off:off + tile])
            np.copyto(by, y[off:off + tile])
            np.add(bx, by, out=bz)
            np.copyto(z[off:off + tile], bz)

    sim_s, np_s, res = measure(lambda: simulate_vector_add(x, y), floor, repeat)
    assert np.array_equal(res["z"], x + y)
    return line("vector_add", sim_s, np_s, res.profile, elements=n, tile=tile, target_sim_s=0.020,
                target_ratio=3.0)


@case("matmul")
def bench_matmul(repeat: int) -> dict:
    """(b) matmul 256 x 256 x 256, fp16 -> fp32, 64 x 64 x 64 base blocks, one block."""
    a, b = matmul_inputs()
    m = n = k = MATMUL["size"]
    bs = MATMUL["block"]
    c = np.empty((m, n), np.float32)

    def floor():
        for i in range(0, m, bs):
            for j in range(0, n, bs):
                acc = np.zeros((bs, bs), np.float32)
                for kk in range(0, k, bs):
                    acc += a[i:i + bs, kk:kk + bs].astype(np.float32) @ b[kk:kk + bs, j:j + bs].astype(np.float32)
                c[i:i + bs, j:j + bs] = acc

    sim_s, np_s, res = measure(lambda: simulate_matmul(a, b), floor, repeat)
    assert np.allclose(res["c"], a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-3)
    return line("matmul", sim_s, np_s, res.profile, shape=[m, n, k], base_block=[bs, bs, bs],
                mac_utilization=round(res.profile.mac_utilization, 4), target_sim_s=0.020, target_ratio=5.0)
