"""``npusim bench --only scaling``: the simulator's cost stays linear in the work.

Vector add of 64 K, 1 M and 16 M fp16 elements (4096-element tiles) and matmul of 256^3, 512^3 and 1024^3
(64^3 base blocks), one block each, numerics, timing and sanitizer on: CPU nanoseconds per element and per
multiply-accumulate for each size, and ``growth``, the largest of them over the smallest (1.0 is exactly
linear; the smallest size pays the launch's fixed cost over less work, so it is usually the largest).
Each size runs ``repeat`` times (the 16 M add and the 1024^3 matmul once): process CPU time, which a
loaded machine inflates less than wall time.
"""

from __future__ import annotations

import time

import numpy as np

from . import case

VECTOR_SIZES = (1 << 16, 1 << 20, 1 << 24)
MATMUL_SIZES = (256, 512, 1024)


def _cpu_s(fn, repeat: int) -> float:
    """The least process CPU seconds of ``repeat`` calls of ``fn`` (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(max(1, repeat)):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _growth(per_unit: list[float]) -> float:
    return round(max(per_unit) / min(per_unit), 2)


@case("scaling")
def bench_scaling(repeat: int) -> dict:
    """ns per element of vector add and ns per MAC of matmul over three sizes each."""
    from ..kernels.matmul import MatmulTiling, run_matmul
    from ..kernels.vector_add import run_vector_add

    rng = np.random.default_rng(0)
    add_ns = []
    for n in VECTOR_SIZES:
        x, y = rng.random(n).astype(np.float16), rng.random(n).astype(np.float16)
        s = _cpu_s(lambda: run_vector_add(x, y, tile=4096, buffer_num=2), repeat if n < 1 << 24 else 1)
        add_ns.append(round(s * 1e9 / n, 2))
    mm_ns = []
    for n in MATMUL_SIZES:
        a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
        s = _cpu_s(lambda: run_matmul(a, b, tiling=MatmulTiling(64, 64, 64, 2)), repeat if n < 1024 else 1)
        mm_ns.append(round(s * 1e9 / n ** 3, 4))
    return {"kernel": "scaling", "vector_add_elements": list(VECTOR_SIZES), "vector_add_ns_per_element": add_ns,
            "vector_add_growth": _growth(add_ns), "matmul_sizes": list(MATMUL_SIZES), "matmul_ns_per_mac": mm_ns,
            "matmul_growth": _growth(mm_ns)}
