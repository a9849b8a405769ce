"""``npusim bench``: how fast the simulator runs, beside the same tile loop in plain numpy (the floor).

Each case prints one JSON object per line: ``kernel``, ``sim_s`` (median wall seconds per launch with
numerics, timing and sanitizer on), ``numpy_s`` (median of the numpy floor), ``ratio = sim_s / numpy_s``,
``instructions``, ``sim_cycles``, and the targets; ``initcheck`` gives what initialisation tracking costs. Simulator and floor runs alternate, so that a noisy,
shared machine slows both alike; compare the ratio, not the seconds.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Callable

import numpy as np

CASES: dict[str, Callable[[int], dict]] = {}


def case(name: str):
    """Register a benchmark case: a function ``repeat -> dict`` of figures."""
    def deco(fn):
        CASES[name] = fn
        return fn
    return deco


#: The simulation :func:`measure` timed last (the initcheck case times it again, with initcheck off).
LAST_SIM: list[Callable[[], object]] = []


def measure(sim: Callable[[], object], floor: Callable[[], object] | None, repeat: int) -> tuple[float, float, object]:
    """Median seconds of ``sim`` and ``floor`` over ``repeat`` alternating runs after one warm-up each."""
    LAST_SIM[:] = [sim]
    result = sim()
    if floor:
        floor()
    ts, tf = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = sim()
        ts.append(time.perf_counter() - t0)
        if floor:
            t0 = time.perf_counter()
            floor()
            tf.append(time.perf_counter() - t0)
    return statistics.median(ts), (statistics.median(tf) if tf else float("nan")), result


def _line(kernel: str, sim_s: float, numpy_s: float, profile, **extra) -> dict:
    d = {"kernel": kernel, "sim_s": round(sim_s, 5), "numpy_s": round(numpy_s, 5),
         "ratio": round(sim_s / numpy_s, 2) if numpy_s == numpy_s and numpy_s > 0 else None}
    if profile is not None:
        d.update(instructions=profile.instruction_count, sim_cycles=round(profile.total_cycles),
                 sim_time_us=round(profile.time_us, 3))
    d.update(extra)
    return d


@case("vector_add")
def bench_vector_add(repeat: int) -> dict:
    """(a) vector add, 1,048,576 fp16 elements, 4096-element tiles, double-buffered, one block."""
    from .kernels.vector_add import run_vector_add

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
    return _line("vector_add", sim_s, np_s, res.profile, elements=n, tile=tile, target_sim_s=0.020,
                 target_ratio=5.0)


@case("matmul")
def bench_matmul(repeat: int) -> dict:
    """(b) matmul 256 x 256 x 256, fp16 -> fp32, 64 x 64 x 64 base blocks, one block."""
    from .kernels.matmul import MatmulTiling, run_matmul

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
    return _line("matmul", sim_s, np_s, res.profile, shape=[m, n, k], base_block=[bs, bs, bs],
                 mac_utilization=round(res.profile.mac_utilization, 4), target_sim_s=0.020, target_ratio=5.0)


#: The cases whose ``sim_s`` initcheck may slow by at most 10 %.
INITCHECK_CASES = ("vector_add", "matmul", "conv2d_img2col")


@case("initcheck")
def bench_initcheck(repeat: int) -> dict:
    """What initialisation tracking (:mod:`npusim.initcheck`) costs: the simulation of each case of
    ``INITCHECK_CASES``, timed with initcheck on and off alternately, ``3 * repeat`` times each;
    ``cost = with_s / without_s - 1`` (medians), to stay within ``budget``."""
    from . import initcheck

    kernels = {}
    for name in (n for n in INITCHECK_CASES if n in CASES):
        CASES[name](1)
        sim = LAST_SIM[0]
        on, off = [], []
        try:
            for _ in range(3 * max(1, repeat)):
                for enabled, out in ((True, on), (False, off)):
                    initcheck.ENABLED = enabled
                    t0 = time.perf_counter()
                    sim()
                    out.append(time.perf_counter() - t0)
        finally:
            initcheck.ENABLED = True
        w, wo = statistics.median(on), statistics.median(off)
        kernels[name] = {"with_s": round(w, 5), "without_s": round(wo, 5), "cost": round(w / wo - 1, 4)}
    return {"kernel": "initcheck", "kernels": kernels, "budget": 0.10}


def run(repeat: int = 5, only: list[str] | None = None) -> int:
    _load_plugins()
    names = only or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(json.dumps({"error": f"unknown case(s) {unknown}; known: {sorted(CASES)}"}))
        return 2
    for name in names:
        print(json.dumps(CASES[name](repeat)), flush=True)
    return 0


#: Modules whose import registers more cases (defined next to the code they measure).
PLUGINS: tuple[str, ...] = ("npusim.views.bench_cases", "npusim.conv.bench_cases")


def _load_plugins() -> None:
    import importlib

    for mod in PLUGINS:
        importlib.import_module(mod)
