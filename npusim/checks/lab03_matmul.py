"""Checks of lab 03 (matmul on the Cube)."""

from __future__ import annotations

import numpy as np

from ..errors import NpuSimError
from ..kernels.matmul import MatmulTiling, run_matmul
from ._core import CheckFailed, call_learner, compare, passed, run_kernel


_MATMUL_CASES = [  # (m, k, n, tiling, block_dim)
    (16, 16, 16, MatmulTiling(16, 16, 16, 1), 1), (1, 1, 1, MatmulTiling(16, 16, 16, 2), 1),
    (37, 50, 29, MatmulTiling(32, 32, 32, 2), 1), (128, 96, 64, MatmulTiling(64, 64, 32, 2), 2),
    (100, 200, 150, MatmulTiling(64, 32, 64, 2), 3),
]


def matmul(kernel) -> None:
    """Lab 03, exercise 1: ``kernel(a, b, c, m, n, k, tiling)`` computes ``c = a @ b`` (fp16 in, fp32
    out) on hidden shapes and tilings."""
    __tracebackhide__ = True
    name = "matmul"
    for i, (m, k, n, tiling, bd) in enumerate(_MATMUL_CASES):
        rng = np.random.default_rng(40 + i)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.full((m, n), np.nan, np.float32)
        case = {"m": m, "k": k, "n": n, "tiling": f"{tiling.base_m}x{tiling.base_n}x{tiling.base_k}",
                "block_dim": bd}
        run_kernel(name, kernel, bd, a, b, c, m, n, k, tiling, case=case)
        want = a.astype(np.float64) @ b.astype(np.float64)
        compare(name, c, want, case, rtol=1e-5, atol=1e-5 * np.sqrt(k),
                look_at="partial tiles at the edges (m, n, k not multiples of the base block) and "
                        "cmatrix_init_val on the first K step only")
    passed(name, f"{len(_MATMUL_CASES)} hidden shapes, including 1x1x1 and odd edges")


UTILIZATION_TARGET = 0.35
TARGET_SHAPE = (1024, 1024, 1024)


def matmul_tiling(tiling) -> None:
    """Lab 03, exercise 2: with ``tiling`` (a MatmulTiling, or a function returning one), the reference matmul reaches the Cube utilisation target on
    1024 x 1024 x 1024 fp16 -> fp32 (one core)."""
    __tracebackhide__ = True
    name = "matmul_tiling"
    if callable(tiling):
        tiling = call_learner(name, tiling)
    if not isinstance(tiling, MatmulTiling):
        raise CheckFailed(name, f"expected a MatmulTiling(base_m, base_n, base_k, buffer_num), got {tiling!r}")
    m, k, n = TARGET_SHAPE
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    try:
        prof = run_matmul(a, b, tiling=tiling).profile
    except NpuSimError as e:
        raise CheckFailed(name, f"the tiling {tiling} does not run: {type(e).__name__}: {e}") from None
    u = prof.mac_utilization
    if u < UTILIZATION_TARGET:
        raise CheckFailed(name, f"{tiling} reaches {u:.1%} Cube utilisation ({prof.time_us:.0f} us, critical "
                                f"pipe {prof.critical_pipe}); the target is {UTILIZATION_TARGET:.0%}. Look at: "
                                f"the bytes each K step loads per MAC (bigger m and n reuse each loaded byte "
                                f"more), what L0C can hold, and whether one or two buffers leave room.")
    passed(name, f"{tiling}: {u:.1%} Cube utilisation on {m}x{k}x{n} fp16")

