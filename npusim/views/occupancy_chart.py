"""Bytes of live tensors over time in each on-chip memory of one block."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..errors import UsageError
from .style import ROLE, as_profile, figure
from .timeline_chart import block_window
from .style import readable

MEMORIES = ("UB", "L1", "L0A", "L0B", "L0C")
SCALES = ("reserved", "capacity")


def occupancy(profile: Any, block: int = 0, scale: str = "reserved", baseline: Any = None) -> Figure:
    """Bytes of live tensors over time in each on-chip memory the block used (a step plot of
    ``profile.occupancy_events``, in KB), against the bytes reserved by ``init_buffer`` in that block
    (dotted) and the memory's capacity (dashed).

    ``scale="reserved"`` fits each memory's axis to what the block reserved (or used), so a few KB of live
    tensors do not sit flat on a 192 KB axis; the legend gives the capacity, saying when it is above the
    axis. ``scale="capacity"`` draws every axis up to the capacity. ``baseline`` (a Profile):
    the axes span the longer block and the larger reservation of the two.
    """
    prof = as_profile(profile)
    if scale not in SCALES:
        raise UsageError(f"occupancy(scale={scale!r}): choose one of {SCALES}")
    if not 0 <= block < prof.block_dim:
        raise UsageError(f"block {block} does not exist: the launch has blocks 0..{prof.block_dim - 1}")
    events = [ev for ev in prof.occupancy_events if ev[0] == block]
    reserved = prof.block_reserved_bytes[block] if prof.block_reserved_bytes else prof.reserved_bytes
    mems = [m for m in MEMORIES if reserved.get(m) or any(ev[2] == m for ev in events)]
    t0, t1 = block_window(prof, block)
    shown = t1 - t0
    base_reserved: dict[str, int] = {}
    if baseline is not None:
        base = as_profile(baseline)
        bb = block if block < base.block_dim else 0
        b0, b1 = block_window(base, bb)
        shown = max(shown, b1 - b0)
        base_reserved = base.block_reserved_bytes[bb] if base.block_reserved_bytes else base.reserved_bytes
    rows = max(len(mems), 1)
    height = 1.1 + 1.5 * rows
    fig = figure(9.0, height)
    h = (1 - 1.1 / height) / rows
    axes = [fig.add_axes((0.09, 0.65 / height + (rows - 1 - r) * h, 0.55, h * 0.8)) for r in range(rows)]
    if not mems:
        axes[0].text(0.5, 0.5, "no on-chip buffers used", transform=axes[0].transAxes, ha="center")
        axes[0].set_ylabel("live (KB)")
    for ax, mem in zip(axes, mems):
        ev = [(t, d) for _, t, m, d in events if m == mem]
        times = np.array([t0] + [t for t, _ in ev], float)
        deltas = np.array([0] + [d for _, d in ev], float)
        # sum the changes at equal times first: a free and an alloc at the same cycle are no peak
        uniq, inv = np.unique(times, return_inverse=True)
        per_t = np.zeros(len(uniq))
        np.add.at(per_t, inv, deltas)
        live = np.cumsum(per_t)
        xs = np.append(uniq, max(t1, uniq[-1]))
        ys = np.append(live, live[-1]) / 1024
        cap = prof.config.memory_bytes(mem) / 1024
        res = reserved.get(mem, 0) / 1024
        top = cap if scale == "capacity" else max(res, base_reserved.get(mem, 0) / 1024, float(ys.max()), 1.0)
        ax.step(xs, ys, where="post", color=ROLE["achieved"], label="live tensors", gid=f"live|{mem}")
        ax.axhline(res, ls=":", color=ROLE["reserved"], label=f"reserved {res:,.1f} KB", gid=f"reserved|{mem}")
        off = "" if cap <= top * 1.1 else " (above the axis)"  # the line is then clipped away
        ax.axhline(cap, ls="--", color=ROLE["capacity"], label=f"capacity {cap:,.0f} KB{off}",
                   gid=f"capacity|{mem}")
        ax.set_ylim(0, top * 1.1)
        ax.set_xlim(t0, t0 + max(shown, 1.0))
        ax.set_ylabel(f"{mem} (KB)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", frameon=False,
                  borderaxespad=0.0)
        if ax is not axes[-1]:
            ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("time (cycles)")
    axes[0].set_title(f"{prof.kernel}: on-chip buffer occupancy, block {block}", loc="left", fontsize="medium")
    return readable(fig)
