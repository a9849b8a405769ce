"""Benchmark of the visual layer: ``npusim bench --only explorer_redraw``.

Measures what a learner feels in lab 01: the milliseconds from moving the tile slider to the new charts
being in the widget (simulation + the lab's two charts + PNG rendering + metrics table), in-process, no
browser. The charts are the ones lab 01's explorer shows (pipe ratios are in its metrics table).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from . import case

#: Tile sizes the redraws step through (all fit UB with one or two buffers of three queues).
_TILES = (256, 512, 1024, 2048, 4096, 8192)
_CHANGES = (2048, 512, 4096, 256, 8192, 1024)
#: The charts lab 01's explorer draws (keep the two in step).
CHARTS_OF_LAB01 = ("timeline", "bandwidth")


@case("explorer_redraw")
def bench_explorer_redraw(repeat: int) -> dict:
    """Vector add of 65,536 fp16 elements in an Explorer (tile slider, buffer-count dropdown; charts
    timeline + bandwidth, as in lab 01): median ms from a slider change to the finished redraw."""
    from ..kernels.vector_add import run_vector_add
    from ..views.explorer import Explorer, choice, int_choice

    n = 65536
    rng = np.random.default_rng(0)
    x = rng.random(n).astype(np.float16)
    y = rng.random(n).astype(np.float16)
    ex = Explorer(lambda tile, buffer_num: run_vector_add(x, y, tile=tile, buffer_num=buffer_num),
                  [int_choice("tile", _TILES, value=1024), choice("buffer_num", [1, 2], value=2)],
                  charts=CHARTS_OF_LAB01)
    ex.controls["tile"].value = 4096  # warm-up: caches, fonts
    changes = [_CHANGES[i % len(_CHANGES)] for i in range(max(5, repeat))]
    times, parts, instrs = [], {"run": [], "charts": [], "render": []}, []
    for tile in changes:
        if ex.controls["tile"].value == tile:
            continue
        before = ex.redraws
        t0 = time.perf_counter()
        ex.controls["tile"].value = tile  # observers run synchronously: returns after the redraw
        times.append(time.perf_counter() - t0)
        if ex.redraws != before + 1:
            raise RuntimeError(f"explorer did not redraw for tile={tile}: {ex.last_error}")
        for k, v in ex.last_timing.items():
            parts[k].append(v)
        instrs.append(ex.last_profile.instruction_count)
    ms = lambda v: round(statistics.median(v) * 1e3, 1)  # noqa: E731
    return {"kernel": "explorer_redraw", "redraw_ms": ms(times), "target_ms": 150,
            "run_ms": ms(parts["run"]), "charts_ms": ms(parts["charts"]), "render_ms": ms(parts["render"]),
            "changes": len(times), "elements": n, "tiles": changes,
            "instructions": int(statistics.median(instrs)), "max_instructions": max(instrs)}
