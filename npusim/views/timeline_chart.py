"""The timeline of a launch: one lane per pipe, a bar per instruction, coloured by operation family."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..errors import UsageError
from ..pipes import PIPE_ORDER
from ..profile import Profile
from .binning import busy_per_bin
from .style import PIPE_LABELS, ROLE, as_profile, category_labels, family, family_legend, figure, pipe_label
from .style import readable

#: A timeline lane with more bars than this is drawn as busy-fraction bins.
DENSE_BARS = 2000
#: Bins of a dense lane (about 2 px each at the default width).
N_BINS = 300
#: Width of the plotting area of a timeline in pixels, used to decide when bars are sub-pixel.
_TIMELINE_PX = 560


def block_window(prof: Profile, block: int | None) -> tuple[float, float]:
    """Time span shown: the whole launch, or one block from when its core became free."""
    if block is None:
        return 0.0, prof.total_cycles
    return prof.block_start_cycles[block], prof.block_end_cycles[block]


def _baseline_span(baseline: Profile | None, block: int | None) -> float | None:
    if baseline is None:
        return None
    b = block if block is None or block < baseline.block_dim else None
    t0, t1 = block_window(baseline, b)
    return t1 - t0


def timeline(profile: Any, block: int | None = 0, baseline: Any = None) -> Figure:
    """Instructions per pipe over time, coloured by operation family (:data:`~npusim.views.style.FAMILIES`).

    One lane per pipe (MTE2, MTE1, M, V, FIX, MTE3, S: the order data flows through the core) for
    ``block``; ``block=None`` shows every core, one group of lanes (the pipes it used) per core, with
    blocks of later waves on the same lanes. A lane with more than :data:`DENSE_BARS` bars, or whose bars
    are mostly narrower than a pixel, is drawn as stacked busy fractions per time bin instead (marked
    ``*``). ``baseline`` (a Profile): the time axis spans the longer of the two, and a dashed line marks
    where the baseline ended, so a faster or slower setting shows as a shorter or longer timeline.
    """
    prof = as_profile(profile)
    base = as_profile(baseline) if baseline is not None else None
    if block is not None and not 0 <= block < prof.block_dim:
        raise UsageError(f"block {block} does not exist: the launch has blocks 0..{prof.block_dim - 1}")
    instrs = prof.instructions
    n_cores = prof.active_cores
    # lanes: (key, label); key is (core or block, pipe)
    if block is None:
        used = {(i.block % n_cores, i.pipe) for i in instrs}
        lanes = [((c, p), f"core {c} {p.name}" if n_cores > 1 else PIPE_LABELS[p])
                 for c in range(n_cores) for p in PIPE_ORDER if (c, p) in used]
        sel = instrs
        key_of = lambda i: (i.block % n_cores, i.pipe)  # noqa: E731
    else:
        lanes = [((block, p), PIPE_LABELS[p]) for p in PIPE_ORDER]
        sel = [i for i in instrs if i.block == block]
        key_of = lambda i: (i.block, i.pipe)  # noqa: E731
    t0, t1 = block_window(prof, block)
    span = (t1 - t0) or 1.0
    base_span = _baseline_span(base, block)
    shown = max(span, base_span or 0.0)

    per_lane: dict[tuple, list] = {k: [] for k, _ in lanes}
    for i in sel:
        per_lane[key_of(i)].append(i)

    # tall enough for the family legend beside the lanes (one MIN_POINTS line per family)
    height = max(min(1.6 + 0.32 * max(len(lanes), 1), 14.0), 3.5)
    fig = figure(9.5, height)
    ax = fig.add_axes((0.13, 0.95 / height, 0.6, 1 - 1.6 / height))
    edges = np.linspace(t0, t1, N_BINS + 1)
    dense_lanes: set = set()
    used_families = set()
    for y, (key, label) in enumerate(lanes):
        rows = per_lane[key]
        if not rows:
            continue
        s = np.fromiter((r.start for r in rows), float, len(rows))
        e = np.fromiter((r.end for r in rows), float, len(rows))
        # too many bars, or most of them sub-pixel: draw busy fractions instead of bars
        dense = len(rows) > DENSE_BARS or bool(np.median((e - s) / shown * _TIMELINE_PX) < 1.0)
        if dense:
            dense_lanes.add(key)
        by_op: dict[str, list[int]] = {}
        for idx, r in enumerate(rows):
            by_op.setdefault(r.op, []).append(idx)
        lane_y = len(lanes) - 1 - y  # first lane on top
        base_frac = np.zeros(N_BINS)
        width = np.diff(edges)
        for op, idx in by_op.items():
            fam = family(op)
            used_families.add(fam)
            if not dense:
                ax.broken_barh(np.column_stack((s[idx], e[idx] - s[idx])), (lane_y - 0.4, 0.8),
                               facecolors=fam.colour, edgecolor="none", gid=f"bars|{label}|{op}")
                continue
            top = base_frac + busy_per_bin(s[idx], e[idx], edges) / width
            # step="post" needs the last value repeated to close the last bin
            ax.fill_between(edges, lane_y - 0.4 + 0.8 * np.append(base_frac, base_frac[-1]),
                            lane_y - 0.4 + 0.8 * np.append(top, top[-1]), step="post",
                            color=fam.colour, linewidth=0, gid=f"bins|{label}|{op}")
            base_frac = top

    lane_labels = [label + (" *" if k in dense_lanes else "") for k, label in lanes][::-1]
    category_labels(ax, "y", range(len(lanes)), lane_labels)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(t0, t0 + max(shown, 1.0))  # an empty launch has zero length
    ax.xaxis.set_major_locator(MaxNLocator(6))  # every tick costs drawing time on each redraw
    xlabel = (f"time (cycles at {prof.config.clock_ghz:g} GHz; 1 us = {prof.config.clock_ghz * 1e3:,.0f} "
              "cycles)")
    if dense_lanes:
        xlabel += f"\n* lane drawn as busy fraction per {span / N_BINS:,.0f}-cycle bin"
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    if base_span is not None:
        ax.axvline(t0 + base_span, color=ROLE["baseline"], ls="--", lw=1.2, gid="baseline_end")
        ax.annotate("baseline end", (t0 + base_span, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 2),
                    textcoords="offset points", fontsize="x-small", va="bottom", color=ROLE["baseline"],
                    ha="right" if base_span > 0.85 * shown else "center", annotation_clip=False)
    where = "all blocks" if block is None else f"block {block} of {prof.block_dim}"
    crit = prof.critical_pipe
    vs = f" | {base.time_us / prof.time_us:.2f}x vs baseline" if base is not None and prof.time_us else ""
    ax.set_title(f"{prof.kernel}: timeline, {where}\n"
                 f"total {prof.time_us:.3f} us ({prof.total_cycles:,.0f} cycles) | critical pipe: "
                 f"{pipe_label(crit)} ({prof.pipe_ratio.get(crit, 0):.0%} busy){vs}", loc="left",
                 fontsize="medium", pad=14)  # room for the baseline's label, pinned or not
    if not sel:
        ax.text(0.5, 0.5, "no instructions", transform=ax.transAxes, ha="center", va="center")
    family_legend(ax, used_families)
    return readable(fig)
