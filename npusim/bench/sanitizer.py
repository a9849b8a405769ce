"""``npusim bench --only initcheck``: what initialisation tracking (:mod:`npusim.initcheck`) costs."""

from __future__ import annotations

import statistics
import time

from . import CASES, LAST_SIM, case

#: The cases whose ``sim_s`` initcheck may slow by at most ``BUDGET``.
INITCHECK_CASES = ("vector_add", "matmul", "conv2d_img2col")
BUDGET = 0.10


@case("initcheck")
def bench_initcheck(repeat: int) -> dict:
    """The simulation of each case of ``INITCHECK_CASES``, timed with initcheck on and off alternately,
    ``3 * repeat`` times each: ``cost = with_s / without_s - 1`` (medians), to stay within ``budget``."""
    from .. import initcheck

    kernels = {}
    for name in (n for n in INITCHECK_CASES if n in CASES):
        CASES[name](1)  # its measure() leaves the simulation in LAST_SIM
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
    return {"kernel": "initcheck", "kernels": kernels, "budget": BUDGET}
