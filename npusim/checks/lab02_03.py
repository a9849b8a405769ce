"""Checks of lab 02 (softmax on the vector unit) and lab 03 (matmul on the Cube)."""

from __future__ import annotations

import numpy as np

from ..errors import NpuSimError
from ..kernels.matmul import MatmulTiling, run_matmul
from ._core import CheckFailed, call_learner, compare, passed, run_kernel


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


_SOFTMAX_CASES = [  # (rows, cols, tile, scale, dtype): short, odd, long rows, huge values
    (3, 1, 256, 1.0, np.float32), (4, 100, 256, 3.0, np.float16), (2, 1000, 256, 30.0, np.float16),
    (5, 4096, 1024, 5.0, np.float32), (2, 10_001, 2048, 50.0, np.float16), (3, 333, 4096, 100.0, np.float32),
]


def softmax(kernel) -> None:
    """Lab 02: ``kernel(x, y, rows, cols, tile)`` writes the row-wise softmax of ``x`` into ``y``,
    staying finite and accurate for large inputs and for rows longer than ``tile``."""
    __tracebackhide__ = True
    name = "softmax"
    for i, (rows, cols, tile, scale, dt) in enumerate(_SOFTMAX_CASES):
        rng = np.random.default_rng(20 + i)
        x = (rng.standard_normal((rows, cols)) * scale).astype(dt)
        y = np.full_like(x, np.nan)
        case = {"rows": rows, "cols": cols, "tile": tile, "values up to": f"±{4 * scale:g}",
                "dtype": np.dtype(dt).name}
        run_kernel(name, kernel, 1, x, y, rows, cols, tile, case=case)
        fp16 = dt == np.float16
        if not np.isfinite(y).all():
            raise CheckFailed(name, f"on [{', '.join(f'{k}={v}' for k, v in case.items())}] the output holds "
                                    f"inf or NaN: exp of a large input overflows "
                                    f"({'fp16 overflows above 65504, i.e. exp(x) for x > 11.09' if fp16 else 'fp32 overflows for x > 88.7'}). "
                                    f"Look at: subtract the row maximum before exp.")
        compare(name, y, _softmax_ref(x), case, rtol=2e-3 if fp16 else 1e-4, atol=1e-4 if fp16 else 1e-7,
                look_at="rows longer than the tile: every chunk must use the maximum and sum of the whole row")
    passed(name, f"{len(_SOFTMAX_CASES)} hidden inputs (long rows, values up to ±400, fp16 and fp32)")


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

