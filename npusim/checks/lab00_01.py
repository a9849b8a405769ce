"""Checks of lab 00 (tour of the NPU) and lab 01 (vector add)."""

from __future__ import annotations

import numpy as np

from ..config import a2, classic
from ..kernels.vector_add import vector_add as _reference_add
from ..launch import launch
from ._core import CheckFailed, call_learner, compare, passed, run_kernel

_HIDDEN_CONFIGS = (a2, classic, a2.replace(name="a2-slow", clock_ghz=1.2),
                   a2.replace(name="a2-int8-fast", cube_macs_per_cycle={"float16": 2048, "int8": 8192}))


def peak_tflops(fn) -> None:
    """Lab 00: ``fn(config) -> float``, one core's peak fp16 Cube TFLOPS."""
    __tracebackhide__ = True
    name = "peak_tflops"
    for cfg in _HIDDEN_CONFIGS:
        want = cfg.cube_peak_flops("float16") / 1e12
        got = call_learner(name, fn, cfg)
        if got is None or not np.isfinite(got) or abs(got - want) > 1e-6 * want:
            raise CheckFailed(name, f"for the config '{cfg.name}' (clock {cfg.clock_ghz} GHz, "
                                    f"{cfg.cube_macs_per_cycle['float16']} fp16 MACs per cycle) expected "
                                    f"{want:.4f} TFLOPS, got {got!r}. Look at: a MAC is 2 FLOPs; TFLOPS = "
                                    f"FLOPs per cycle x cycles per second / 1e12.")
    passed(name, f"{len(_HIDDEN_CONFIGS)} configs, including two you have not seen")


def _copy_kernel(x, y, n):
    import npusim as ns

    pipe = ns.TPipe()
    q = ns.TQueBind(ns.TPosition.VECIN, ns.TPosition.VECOUT)
    pipe.init_buffer(q, 1, n * x.dtype.itemsize)
    t = q.alloc_tensor(x.dtype)
    ns.data_copy(t, x, n)
    q.enque(t)
    t = q.deque()
    ns.data_copy(y, t, n)
    q.free_tensor(t)


def copy_cycles(fn) -> None:
    """Lab 00: ``fn(config, nbytes) -> float``, the duration in cycles of one contiguous GM -> UB
    data_copy of ``nbytes`` starting at a 512 B aligned GM address, on one core."""
    __tracebackhide__ = True
    name = "copy_cycles"
    cases = [(a2, 8192), (a2, 32), (classic, 65536), (a2, 1000 * 32), (a2.replace(name="a2-wide",
             gm_port_bytes_per_cycle=128), 4096)]
    for cfg, nbytes in cases:
        x = np.zeros(nbytes // 2, np.float16)
        prof = launch(_copy_kernel, 1, x, np.zeros_like(x), x.size, config=cfg).profile
        copy = next(i for i in prof.instructions if i.pipe.name == "MTE2")
        want = copy.end - copy.start
        got = call_learner(name, fn, cfg, nbytes)
        if got is None or abs(got - want) > 1e-6 * want:
            raise CheckFailed(name, f"on [config={cfg.name}, nbytes={nbytes}] the simulator's copy took "
                                    f"{want:g} cycles, you predicted {got!r}. Look at: the GM DMA row of "
                                    f"docs/cost-model.md (start-up, one burst, 32 B granules, the GM rate "
                                    f"config.gm_rate(1)).")
    passed(name, f"{len(cases)} copies predicted to the cycle")


# --- lab 01 --------------------------------------------------------------------------------------------

_ADD_CASES = [  # (total, tile, block_dim, dtype): odd sizes, tails, one element, the largest tile that fits
    (1, 256, 1, np.float16), (16, 256, 1, np.float16), (4096, 1024, 1, np.float16),
    (4097, 1024, 1, np.float16), (1000, 512, 2, np.float32), (100_003, 4096, 3, np.float16),
    (20_000, 2048, 8, np.float32), (65_539, 32_768, 2, np.float16),
]


def _add_inputs(total, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(total) * 100).astype(dtype)
    y = (rng.standard_normal(total) * 100).astype(dtype)
    return x, y


def vector_add(kernel) -> None:
    """Lab 01, exercise 1: ``kernel(x, y, z, total, tile)`` computes ``z = x + y`` on hidden sizes."""
    __tracebackhide__ = True
    name = "vector_add"
    for i, (total, tile, bd, dt) in enumerate(_ADD_CASES):
        case = {"total": total, "tile": tile, "block_dim": bd, "dtype": np.dtype(dt).name}
        x, y = _add_inputs(total, dt, i)
        z = np.full_like(x, np.nan)
        run_kernel(name, kernel, bd, x, y, z, total, tile, case=case)
        compare(name, z, x + y, case,
                look_at="the tail (the last tile is shorter) and each block's start and length")
    passed(name, f"{len(_ADD_CASES)} hidden inputs (tails, one element, several blocks, fp16 and fp32)")


TARGET_ROOFLINE = 0.85


def vector_add_fast(kernel, tile) -> None:
    """Lab 01, exercise 2: ``kernel(x, y, z, total, tile, buffer_num)`` is correct with two buffers and, on
    1,048,576 fp16 elements with the learner's ``tile`` (an int, or a function returning it), reaches 85 %
    of the GM roofline."""
    __tracebackhide__ = True
    name = "vector_add_fast"
    if callable(tile):
        tile = call_learner(name, tile)
    if not isinstance(tile, (int, np.integer)) or tile < 1:
        raise CheckFailed(name, f"the tile must be a positive number of elements, got {tile!r}")
    for i, (total, t, bd, dt) in enumerate(_ADD_CASES[:-1]):
        case = {"total": total, "tile": t, "block_dim": bd, "dtype": np.dtype(dt).name, "buffer_num": 2}
        x, y = _add_inputs(total, dt, 100 + i)
        z = np.full_like(x, np.nan)
        run_kernel(name, kernel, bd, x, y, z, total, t, 2, case=case)
        compare(name, z, x + y, case, look_at="what changes when two tiles are in flight at once")
    total = 1 << 20
    x, y = _add_inputs(total, np.float16, 7)
    runs = {}
    for bufs in (1, 2):
        case = {"total": total, "tile": tile, "buffer_num": bufs, "dtype": "float16"}
        z = np.full_like(x, np.nan)
        runs[bufs] = run_kernel(name, kernel, 1, x, y, z, total, tile, bufs, case=case).profile
        compare(name, z, x + y, case)
    ref = launch(_reference_add, 1, x, y, np.empty_like(x), total, tile, 2).profile
    eff = runs[2].roofline_efficiency
    if eff < TARGET_ROOFLINE:
        raise CheckFailed(name, f"with tile={tile} and two buffers your kernel takes {runs[2].time_us:.1f} us = "
                                f"{eff:.1%} of the GM roofline ({runs[2].roofline_cycles:,.0f} cycles); the "
                                f"target is {TARGET_ROOFLINE:.0%}. One buffer: {runs[1].time_us:.1f} us; the "
                                f"reference kernel with the same tile: {ref.time_us:.1f} us. Look at: every "
                                f"DMA pays a start-up (longer tiles amortise it) and the three queues x two "
                                f"buffers must fit in UB ({a2.ub_bytes // 1024} KB).")
    passed(name, f"tile={tile}: {eff:.1%} of the roofline with two buffers "
                 f"({runs[1].time_us / runs[2].time_us:.2f}x faster than one buffer)")

