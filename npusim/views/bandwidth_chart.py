"""Achieved vs peak bandwidth per data path of a launch.

The bars beside each path are the entries of :data:`SERIES`, left to right: a new kind of bar (say, a cache
level's rate) is one more entry, ``(label, gid, colour, value(bandwidth_row) -> GB/s)``, and needs no
change to the drawing code.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..profile import PATHS
from .style import FONT, ROLE, as_profile, category_labels, figure, legend_above, value_labels
from .style import readable


class Series(NamedTuple):
    label: str
    gid: str
    colour: str
    value: Callable[[dict], float]


#: The bars per path. The first is labelled with the path's efficiency.
SERIES: list[Series] = [
    Series("achieved", "achieved_gbps", ROLE["achieved"], lambda row: row["achieved_gbps"]),
    Series("peak", "peak_gbps", ROLE["peak"], lambda row: row["peak_gbps"]),
]


#: Rows of ``Profile.bandwidth`` that are not a data path of the core: the chip's L2 and HBM.
CHIP_ROWS = {"L2": "L2 hits\n(GM reads)", "HBM": "HBM\n(reads + writes)"}


def path_order(paths) -> list[str]:
    """Known paths in :data:`npusim.profile.PATHS` order, then the chip's rows (:data:`CHIP_ROWS`), then
    any others by name."""
    known = [p for p in PATHS if p in paths]
    chip = [p for p in CHIP_ROWS if p in paths]
    return known + chip + sorted(p for p in paths if p not in PATHS and p not in CHIP_ROWS)


def bandwidth(profile: Any, baseline: Any = None) -> Figure:
    """Achieved vs peak GB/s per data path (bars are ``profile.bandwidth[path]["achieved_gbps"]`` and
    ``["peak_gbps"]``), labelled with the efficiency; then the chip's L2 (GM reads it served) and HBM
    (reads and writes of all cores, against the one HBM of the chip). ``baseline`` (a Profile): its
    achieved GB/s are drawn as black ticks, and the paths of both are shown.

    The axis fits the paths of the core(s): its top is the highest of their peaks and of every achieved
    rate, so a path at 16 % of its peak is visibly 16 % of its peak bar. A chip row whose peak is far above
    (the chip's HBM against one core's ports) is drawn cut at the top of the axis, marked with its value."""
    prof = as_profile(profile)
    bw = prof.bandwidth
    base_bw = as_profile(baseline).bandwidth if baseline is not None else {}
    paths = path_order(set(bw) | set(base_bw))
    fig = figure(8.0, 3.4)
    ax = fig.add_axes((0.09, 0.2, 0.88, 0.62))
    x = np.arange(len(paths))
    w = 0.8 / len(SERIES)
    empty = {"achieved_gbps": 0.0, "peak_gbps": 0.0, "efficiency": 0.0}
    values = {s.gid: [s.value(bw.get(p, empty)) for p in paths] for s in SERIES}
    base_vals = [base_bw.get(p, empty)["achieved_gbps"] for p in paths] if baseline is not None else []
    core = [v for s in SERIES for p, v in zip(paths, values[s.gid]) if p not in CHIP_ROWS or s.gid != "peak_gbps"]
    top = max([1.0, *core, *base_vals])
    chip_peaks = [v for p, v in zip(paths, values["peak_gbps"]) if p in CHIP_ROWS]
    if any(v <= top * 2 for v in chip_peaks):
        top = max(top, *[v for v in chip_peaks if v <= top * 2])
    ylim = top * 1.15
    for j, s in enumerate(SERIES):
        vals = values[s.gid]
        shown = [min(v, ylim) for v in vals]
        bars = ax.bar(x - 0.4 + w * (j + 0.5), shown, w, color=s.colour, label=s.label, gid=s.gid)
        if j == 0:
            value_labels(bars, [f"{bw[p]['efficiency']:.0%}" if p in bw else "" for p in paths],
                         clear_of=base_vals or None)
        for xi, v, bar in zip(x, vals, bars):
            if v > ylim:   # cut at the top: say how far up it goes
                bar.set_hatch("//")
                bar.set_gid(f"{s.gid}|cut")
                ax.text(xi - 0.4 + w * (j + 0.5), ylim * 0.55, f"{v:,.0f}\nGB/s\n(cut)", ha="center", va="center",
                        fontsize=FONT["value"], gid="cut_label",
                        bbox=dict(boxstyle="square,pad=0.15", fc="white", ec="none", alpha=0.9))
    if baseline is not None:
        ax.plot(x - 0.4 + w / 2, base_vals, "_", color=ROLE["baseline"], markersize=18, markeredgewidth=2,
                label="baseline achieved", gid="baseline")
    category_labels(ax, "x", x, [f"{p}\n({PATHS[p].name})" if p in PATHS else CHIP_ROWS.get(p, p) for p in paths],
                    fontsize=FONT["tick"])
    ax.set_xlim(-0.6, max(len(paths), 1) - 0.4)
    ax.set_ylim(0, ylim)
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_xlabel("data path (pipe); label: achieved / peak", labelpad=30)
    ax.set_title(f"{prof.kernel}: bandwidth per path, {prof.active_cores} core(s)", loc="left",
                 fontsize=FONT["title"], pad=22)
    if not paths:
        ax.text(0.5, 0.5, "no data moved", transform=ax.transAxes, ha="center", va="center")
    legend_above(ax, ncols=len(SERIES) + 1)
    return readable(fig)
