"""Searching legal tilings by simulation: how good :func:`~npusim.conv.choose_tiling` is.

:func:`candidates` lists the legal tilings of a variant over a grid of block sizes (around the default);
:func:`sweep` runs the convolution kernel with each (kernel only, no transforms) and ranks them by
simulated time. The benchmark and a test compare the default with the best one found.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

import npusim as ns

from .api import RUNNERS
from .geometry import ConvGeometry
from .tiling import ConvTiling
from .choose import choose_tiling

#: Values tried per size by default (clipped to the layer and deduplicated).
GRID = {"rows": (1, 2, 4, 7, 8, 14, 16, 28), "cols": (16, 32, 64, 0), "cout_block": (64, 128, 256, 0),
        "cin_block": (0, 64, 128), "m_tile": (16, 32, 64, 128, 256), "k_tile": (32, 64, 128),
        "weights_resident": (True, False), "l1_buffers": (1, 2)}
"""0 stands for "the whole dimension"."""


@dataclass(frozen=True)
class Trial:
    """One simulated tiling: its kernel time and Cube utilisation."""

    tiling: ConvTiling
    time_us: float
    mac_utilization: float


def candidates(g: ConvGeometry, cfg: ns.HardwareConfig | str | None = None, variant: str = "img2col",
               grid: dict[str, Sequence] | None = None) -> list[ConvTiling]:
    """The legal tilings of ``variant`` for ``g`` on ``cfg`` over ``grid`` (default :data:`GRID`); sizes
    the variant does not use keep the default tiling's value."""
    cfg = ns.get_config(cfg)
    base = choose_tiling(g, cfg, variant)
    grid = {**GRID, **(grid or {})}
    whole = {"rows": g.ho, "cols": g.wo, "cout_block": g.cout, "cin_block": g.cin}
    names = ["rows", "cout_block", "cin_block", "weights_resident", "l1_buffers"]
    names += ["m_tile", "k_tile"] if variant == "img2col" else ["cols"]
    if variant == "direct":
        names.remove("weights_resident")
    axes = []
    for name in names:
        vals = [whole.get(name, v) if v == 0 else v for v in grid[name]]
        if name in whole:
            vals = [min(v, whole[name]) for v in vals]
        axes.append(list(dict.fromkeys(vals + [getattr(base, name)])))
    out, seen = [], set()
    for combo in itertools.product(*axes):
        t = base.replace(**dict(zip(names, combo)))
        if t in seen:
            continue
        seen.add(t)
        try:
            t.check(g, cfg)
        except (ns.CapacityError, ns.UsageError, ns.DtypeError):
            continue
        out.append(t)
    return out


def sweep(x: np.ndarray, w: np.ndarray, tilings: Iterable[ConvTiling], *, stride=1, padding=0,
          config=None, progress=None) -> list[Trial]:
    """Simulate the kernel of each tiling on ``x``, ``w`` and rank them, fastest first. ``progress``: a
    callable ``(done, total)`` called after each run (long sweeps show where they are)."""
    tilings = list(tilings)
    trials = []
    for i, t in enumerate(tilings):
        p = RUNNERS[t.variant](x, w, stride=stride, padding=padding, tiling=t, config=config).profile
        trials.append(Trial(t, p.time_us, p.mac_utilization))
        if progress:
            progress(i + 1, len(tilings))
    return sorted(trials, key=lambda tr: tr.time_us)
