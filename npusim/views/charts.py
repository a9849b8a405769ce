"""Charts of a :class:`~npusim.profile.Profile`: pure functions ``profile(s) -> matplotlib Figure``.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through pyplot, so nothing is
registered with pyplot and nothing leaks: a notebook shows a returned Figure through its ``_repr_png_``
(inline), and a script saves it with ``fig.savefig``. Every number drawn is read from the profile
unchanged (bar heights are ``profile.pipe_ratio`` etc.), so a chart never disagrees with ``summary()``.

Artists carry a ``gid`` (``"pipe_ratio"``, ``"achieved_gbps"``, ...) so tests and tools can find them.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter, MaxNLocator, MultipleLocator, PercentFormatter

from ..errors import UsageError
from ..pipes import PIPE_ORDER, Pipe
from ..profile import PATHS, Profile
from .binning import busy_per_bin

#: Resolution figures are made for. Modest on purpose: the explorer redraws them on every slider move.
DPI = 80
#: A timeline lane with more bars than this is drawn as busy-fraction bins.
DENSE_BARS = 2000
#: Bins of a dense lane (about 2 px each at the default width).
N_BINS = 300
#: Width of the plotting area of a timeline in pixels, used to decide when bars are sub-pixel.
_TIMELINE_PX = 560

PIPE_LABELS = {Pipe.MTE2: "MTE2", Pipe.MTE1: "MTE1", Pipe.M: "M (Cube)", Pipe.V: "V (Vector)",
               Pipe.FIX: "FIX", Pipe.MTE3: "MTE3", Pipe.S: "S (Scalar)"}
_BY_MSPROF = {p.msprof_name: p for p in PIPE_ORDER}
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
            "#bcbd22", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2"]
_OTHER = "#b0b0b0"
#: Most operations that get their own colour and legend entry; the rest are "other".
MAX_OPS = len(_PALETTE)
MEMORIES = ("UB", "L1", "L0A", "L0B", "L0C")


# --- helpers -------------------------------------------------------------------------------------

def as_profile(obj: Any) -> Profile:
    """A Profile from a Profile or anything with a ``.profile`` (a LaunchResult)."""
    prof = getattr(obj, "profile", obj)
    if not isinstance(prof, Profile):
        raise UsageError(f"expected a Profile or a LaunchResult, got {type(obj).__name__}")
    return prof


def pipe_label(msprof_name: str) -> str:
    """Display label of a pipe given its msprof name (``"mte2"`` -> ``"MTE2"``)."""
    p = _BY_MSPROF.get(msprof_name)
    return PIPE_LABELS[p] if p is not None else msprof_name


def _figure(width: float, height: float) -> Figure:
    # Figure() is not known to pyplot: no registration, nothing to close, no leak.
    return Figure(figsize=(width, height), dpi=DPI)


def _names(profiles: Sequence[Profile], labels: Sequence[str] | None) -> list[str]:
    if labels is None:
        labels = [p.kernel for p in profiles]
        if len(set(labels)) < len(labels):  # same kernel twice: number them
            labels = [f"{name} #{i + 1}" for i, name in enumerate(labels)]
    elif len(labels) != len(profiles):
        raise UsageError(f"got {len(labels)} label(s) for {len(profiles)} profile(s)")
    return [str(x) for x in labels]


def _op_colours(ops: Sequence[str]) -> dict[str, str]:
    """Colour per operation by first appearance, so one kernel keeps its colours across redraws."""
    out: dict[str, str] = {}
    for op in ops:
        if op not in out:
            out[op] = _PALETTE[len(out)] if len(out) < MAX_OPS else _OTHER
    return out


def _legend(ax, **kw) -> None:
    kw.setdefault("fontsize", "small")
    kw.setdefault("frameon", False)
    ax.legend(**kw)


# --- timeline ------------------------------------------------------------------------------------

def _block_window(prof: Profile, block: int | None) -> tuple[float, float]:
    """Time span shown: the whole launch, or one block from when its core became free."""
    if block is None:
        return 0.0, prof.total_cycles
    return prof.block_start_cycles[block], prof.block_end_cycles[block]


def timeline(profile: Any, block: int | None = 0) -> Figure:
    """Instructions per pipe over time, coloured by operation.

    One lane per pipe (MTE2, MTE1, M, V, FIX, MTE3, S: the order data flows through the core) for
    ``block``; ``block=None`` shows every core, one group of lanes (the pipes it used) per core, with
    blocks of later waves on the same lanes. A lane with more than :data:`DENSE_BARS` bars, or whose bars
    are mostly narrower than a pixel, is drawn as stacked busy fractions per time bin instead (marked
    ``*``); bars and bins both keep the operation colours.
    """
    prof = as_profile(profile)
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
    t0, t1 = _block_window(prof, block)
    span = (t1 - t0) or 1.0
    colours = _op_colours([i.op for i in sel])

    per_lane: dict[tuple, list] = {k: [] for k, _ in lanes}
    for i in sel:
        per_lane[key_of(i)].append(i)

    height = min(1.4 + 0.32 * max(len(lanes), 1), 14.0)
    fig = _figure(9.5, height)
    ax = fig.add_axes((0.13, 0.9 / height, 0.66, 1 - 1.5 / height))
    edges = np.linspace(t0, t1, N_BINS + 1)
    dense_lanes: set = set()
    for y, (key, label) in enumerate(lanes):
        rows = per_lane[key]
        if not rows:
            continue
        s = np.fromiter((r.start for r in rows), float, len(rows))
        e = np.fromiter((r.end for r in rows), float, len(rows))
        ops = [r.op for r in rows]
        # too many bars, or most of them sub-pixel: draw busy fractions instead of bars
        dense = len(rows) > DENSE_BARS or bool(np.median((e - s) / span * _TIMELINE_PX) < 1.0)
        if dense:
            dense_lanes.add(key)
        by_op: dict[str, list[int]] = {}
        for idx, op in enumerate(ops):
            by_op.setdefault(op, []).append(idx)
        lane_y = len(lanes) - 1 - y  # first lane on top
        if not dense:
            for op, idx in by_op.items():
                ax.broken_barh(np.column_stack((s[idx], e[idx] - s[idx])), (lane_y - 0.4, 0.8),
                               facecolors=colours[op], edgecolor="none", gid=f"bars|{label}|{op}")
            continue
        base = np.zeros(N_BINS)
        width = np.diff(edges)
        for op, idx in by_op.items():
            frac = busy_per_bin(s[idx], e[idx], edges) / width
            top = base + frac
            # step="post" needs the last value repeated to close the last bin
            ax.fill_between(edges, lane_y - 0.4 + 0.8 * np.append(base, base[-1]),
                            lane_y - 0.4 + 0.8 * np.append(top, top[-1]), step="post",
                            color=colours[op], linewidth=0, gid=f"bins|{label}|{op}")
            base = top

    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([label + (" *" if k in dense_lanes else "") for k, label in lanes][::-1])
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(t0, max(t1, t0 + 1))  # an empty launch has zero length
    ax.xaxis.set_major_locator(MaxNLocator(6))  # every tick costs drawing time on each redraw
    ax.set_xlabel(f"time (cycles at {prof.config.clock_ghz:g} GHz; 1 us = {prof.config.clock_ghz * 1e3:,.0f} cycles)")
    ax.set_ylabel("pipe")
    ax.grid(axis="x", alpha=0.3)
    where = "all blocks" if block is None else f"block {block} of {prof.block_dim}"
    crit = prof.critical_pipe
    ax.set_title(f"{prof.kernel}: timeline, {where}\n"
                 f"total {prof.time_us:.3f} us ({prof.total_cycles:,.0f} cycles) | critical pipe: "
                 f"{pipe_label(crit)} ({prof.pipe_ratio.get(crit, 0):.0%} busy)", loc="left", fontsize="medium")
    handles = [Patch(color=c, label=op) for op, c in colours.items() if c != _OTHER]
    if any(c == _OTHER for c in colours.values()):
        handles.append(Patch(color=_OTHER, label="other ops"))
    if not handles:
        ax.text(0.5, 0.5, "no instructions", transform=ax.transAxes, ha="center", va="center")
        handles = [Patch(color=_OTHER, label="(none)")]
    if dense_lanes:
        handles.append(Patch(color="white", label=f"* busy fraction\n  per {span / N_BINS:,.0f}-cycle bin"))
    ax.legend(handles=handles, title="operation", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              fontsize="small", frameon=False)
    return fig


# --- pipe utilization ----------------------------------------------------------------------------

def utilization(profile: Any) -> Figure:
    """Busy ratio per pipe (bars are ``profile.pipe_ratio``) and, beside them, the Cube MAC utilization
    (``profile.mac_utilization``). The critical pipe is outlined."""
    prof = as_profile(profile)
    ratio = prof.pipe_ratio
    keys = [p.msprof_name for p in PIPE_ORDER]
    fig = _figure(8.0, 3.4)
    # one axes for both (both are fractions): a second axes would double the tick-drawing cost
    ax = fig.add_axes((0.1, 0.17, 0.86, 0.63))
    heights = [ratio.get(k, 0.0) for k in keys]
    crit = prof.critical_pipe
    bars = ax.bar(range(len(keys)), heights, color="#4c72b0", label="pipe busy ratio (% of kernel time)",
                  gid="pipe_ratio", edgecolor=["black" if k == crit else "none" for k in keys], linewidth=1.5)
    mac_x = len(keys) + 0.5
    mac = ax.bar([mac_x], [prof.mac_utilization], color="#dd8452",
                 label="Cube MAC utilization (% of peak)", gid="mac_utilization")
    ax.axvline(len(keys) - 0.25, color="#999999", lw=0.8, ls=":")
    ax.bar_label(bars, labels=[f"{h:.0%}" for h in heights], fontsize="x-small")
    ax.bar_label(mac, labels=[f"{prof.mac_utilization:.0%}"], fontsize="x-small")
    ax.set_xticks([*range(len(keys)), mac_x])
    ax.set_xticklabels([PIPE_LABELS[p] for p in PIPE_ORDER] + ["Cube MAC"], fontsize="small")
    ax.set_xlim(-0.6, mac_x + 0.6)
    ax.set_ylim(0, max(1.0, *heights, prof.mac_utilization) * 1.12)
    ax.yaxis.set_major_locator(MultipleLocator(0.25))
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("busy / utilization (%)")
    ax.set_xlabel("pipe (outlined: critical pipe)")
    ax.set_title(f"{prof.kernel}: pipe utilization | critical pipe: {pipe_label(crit)}", loc="left",
                 fontsize="medium", pad=22)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, fontsize="small", frameon=False)
    return fig


# --- bandwidth -----------------------------------------------------------------------------------

#: Rows of ``Profile.bandwidth`` that are not a data path of the core: the chip's L2 and HBM.
CHIP_ROWS = {"L2": "L2 hits\n(GM reads)", "HBM": "HBM\n(reads + writes)"}


def _path_order(paths) -> list[str]:
    known = [p for p in PATHS if p in paths]
    chip = [p for p in CHIP_ROWS if p in paths]
    return known + chip + sorted(p for p in paths if p not in PATHS and p not in CHIP_ROWS)


def bandwidth(profile: Any) -> Figure:
    """Achieved vs peak GB/s per data path (bars are ``profile.bandwidth[path]["achieved_gbps"]`` and
    ``["peak_gbps"]``), labelled with the efficiency; then the chip's L2 (GM reads it served) and HBM
    (reads and writes of all cores, against the one HBM of the chip)."""
    prof = as_profile(profile)
    bw = prof.bandwidth
    paths = _path_order(bw)
    fig = _figure(8.0, 3.4)
    ax = fig.add_axes((0.09, 0.2, 0.88, 0.68))
    x = np.arange(len(paths))
    w = 0.38
    ach = [bw[p]["achieved_gbps"] for p in paths]
    peak = [bw[p]["peak_gbps"] for p in paths]
    bars = ax.bar(x - w / 2, ach, w, color="#4c72b0", label="achieved", gid="achieved_gbps")
    ax.bar(x + w / 2, peak, w, color="#c0c0c0", label="peak", gid="peak_gbps")
    ax.bar_label(bars, labels=[f"{bw[p]['efficiency']:.0%}" for p in paths], fontsize="x-small")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{p}\n({PATHS[p].name})" if p in PATHS else CHIP_ROWS.get(p, p) for p in paths],
                       fontsize="small")
    ax.set_xlim(-0.6, max(len(paths), 1) - 0.4)
    ax.set_ylim(0, max([1.0, *ach, *peak]) * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(5))
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_xlabel("data path (pipe); label: achieved / peak")
    ax.set_title(f"{prof.kernel}: bandwidth per path, {prof.active_cores} core(s)", loc="left",
                 fontsize="medium")
    if not paths:
        ax.text(0.5, 0.5, "no data moved", transform=ax.transAxes, ha="center", va="center")
    _legend(ax, loc="upper right")
    return fig


# --- roofline ------------------------------------------------------------------------------------

def _roofs(cfg, n: int) -> list[tuple[str, float]]:
    """Compute roofs (label, FLOP/s) of ``n`` cores: Cube fp16, Cube fp32 where supported, Vector fp16."""
    roofs = [("Cube fp16", cfg.cube_peak_flops("float16") * n)]
    if "float32" in cfg.cube_macs_per_cycle:
        roofs.append(("Cube fp32", cfg.cube_peak_flops("float32") * n))
    roofs.append(("Vector fp16", cfg.vector_peak_flops("float16") * n))
    return roofs


def roofline(profiles: Any, labels: Sequence[str] | None = None, config=None) -> Figure:
    """Roofline (log-log) of one or several kernels on the configured core.

    Roofs: Cube fp16, Cube fp32 (where the preset has it) and Vector fp16 peaks, each capped by GM
    bandwidth (``peak_gm_bytes_per_s``) for the active cores of the profiles; kernels are points at
    ``(arithmetic_intensity, achieved_flops)``. ``config`` defaults to the first profile's.
    """
    from ..config import get_config

    profs = [as_profile(p) for p in (profiles if isinstance(profiles, (list, tuple)) else [profiles])]
    if not profs:
        raise UsageError("roofline needs at least one profile")
    names = _names(profs, labels)
    cfg = get_config(config) if config is not None else profs[0].config
    cores = sorted({p.active_cores for p in profs})
    fig = _figure(9.6, 4.6)
    ax = fig.add_axes((0.09, 0.12, 0.53, 0.76))
    ax.set_xscale("log")
    ax.set_yscale("log")

    pts = [(p.arithmetic_intensity, p.achieved_flops) for p in profs]
    finite = [(x, y) for x, y in pts if np.isfinite(x) and x > 0 and y > 0]
    gm = {n: cfg.gm_rate(n) * n * cfg.clock_ghz * 1e9 for n in cores}
    ridges = [peak / gm[n] for n in cores for _, peak in _roofs(cfg, n)]
    xs = [x for x, _ in finite] + ridges
    x_lo, x_hi = min(xs) / 8, max(xs) * 8
    xgrid = np.geomspace(x_lo, x_hi, 200)
    styles = ["-", "--", ":"]
    roof_colours = ["#d62728", "#9467bd", "#2ca02c"]
    peaks = []
    for n in cores:
        suffix = f" ({n} core{'s' if n > 1 else ''})" if len(cores) > 1 else ""
        for j, (name, peak) in enumerate(_roofs(cfg, n)):
            peaks.append(peak)
            ax.plot(xgrid, np.minimum(peak, xgrid * gm[n]), styles[j % 3], color=roof_colours[j % 3],
                    label=f"{name} {peak / 1e12:.3g} TFLOP/s{suffix}", gid=f"roof|{name}|{n}")
        ax.plot([], [], " ", label=f"GM {gm[n] / 1e9:.0f} GB/s{suffix}")
    marker_colours = ["#1f77b4", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
    skipped = []
    for i, (prof, name, (x, y)) in enumerate(zip(profs, names, pts)):
        if not (np.isfinite(x) and x > 0 and y > 0):
            skipped.append(name)
            continue
        c = marker_colours[i % len(marker_colours)]
        ax.plot([x], [y], "o", color=c, markersize=8, label=f"{name} ({prof.bound}-bound)", gid=f"point|{i}")
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, -12), fontsize="small", color=c)
    ys = [y for _, y in finite] + peaks
    ax.set_ylim(min(ys) / 10, max(ys) * 3)
    ax.set_xlim(x_lo, x_hi)
    ax.xaxis.set_major_formatter(EngFormatter())
    ax.yaxis.set_major_formatter(EngFormatter())
    ax.set_xlabel("arithmetic intensity (FLOP per GM byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.grid(which="major", alpha=0.3)
    title = f"Roofline on {cfg.name}, " + " / ".join(f"{n} core{'s' if n > 1 else ''}" for n in cores)
    if skipped:
        title += f"\nnot plotted (no FLOPs or no GM traffic): {', '.join(skipped)}"
    ax.set_title(title, loc="left", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return fig


# --- buffer occupancy ----------------------------------------------------------------------------

def occupancy(profile: Any, block: int = 0) -> Figure:
    """Bytes of live tensors over time in each on-chip memory the block used (a step plot of
    ``profile.occupancy_events``, in KB), against the capacity (dashed) and the bytes reserved by
    ``init_buffer`` in that block (dotted)."""
    prof = as_profile(profile)
    if not 0 <= block < prof.block_dim:
        raise UsageError(f"block {block} does not exist: the launch has blocks 0..{prof.block_dim - 1}")
    events = [ev for ev in prof.occupancy_events if ev[0] == block]
    reserved = prof.block_reserved_bytes[block] if prof.block_reserved_bytes else prof.reserved_bytes
    mems = [m for m in MEMORIES if reserved.get(m) or any(ev[2] == m for ev in events)]
    t0, t1 = _block_window(prof, block)
    rows = max(len(mems), 1)
    fig = _figure(8.0, 1.1 + 1.5 * rows)
    h = (1 - 1.1 / (1.1 + 1.5 * rows)) / rows
    axes = [fig.add_axes((0.1, 0.65 / (1.1 + 1.5 * rows) + (rows - 1 - r) * h, 0.62, h * 0.8)) for r in range(rows)]
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
        ax.step(xs, ys, where="post", color="#4c72b0", label="live tensors", gid=f"live|{mem}")
        ax.axhline(cap, ls="--", color="#d62728", label=f"capacity {cap:,.0f} KB", gid=f"capacity|{mem}")
        ax.axhline(res, ls=":", color="#555555", label=f"reserved {res:,.1f} KB", gid=f"reserved|{mem}")
        ax.set_ylim(0, cap * 1.1)
        ax.set_xlim(t0, max(t1, t0 + 1))
        ax.set_ylabel(f"{mem} (KB)")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small", frameon=False)
        if ax is not axes[-1]:
            ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("time (cycles)")
    axes[0].set_title(f"{prof.kernel}: on-chip buffer occupancy, block {block}", loc="left", fontsize="medium")
    return fig


# --- comparison ----------------------------------------------------------------------------------

def compare(profiles: Sequence[Any], labels: Sequence[str] | None = None) -> Figure:
    """Two or more profiles side by side: kernel time (us) with the speed-up relative to the first
    (``time[0] / time[i]``, e.g. ``1.42x``), and the busy ratio of every pipe."""
    profs = [as_profile(p) for p in profiles]
    if len(profs) < 2:
        raise UsageError("compare needs at least two profiles")
    names = _names(profs, labels)
    fig = _figure(10.0, 3.8)
    ax = fig.add_axes((0.07, 0.2, 0.3, 0.64))
    ax2 = fig.add_axes((0.45, 0.2, 0.53, 0.64))
    colours = [_PALETTE[i % len(_PALETTE)] for i in range(len(profs))]
    times = [p.time_us for p in profs]
    bars = ax.bar(range(len(profs)), times, color=colours, gid="time_us",
                  label="kernel time")
    speed = [times[0] / t if t else float("inf") for t in times]
    ax.bar_label(bars, labels=[f"{s:.2f}x" for s in speed], fontsize="small", fontweight="bold")
    ax.set_xticks(range(len(profs)))
    ax.set_xticklabels(names, fontsize="small", rotation=15 if len(profs) > 3 else 0)
    ax.set_ylim(0, max(times) * 1.2 or 1)
    ax.set_ylabel("kernel time (us)")
    ax.set_xlabel(f"speed-up vs {names[0]} on bars")
    ax.set_title("time", loc="left", fontsize="medium")
    _legend(ax, loc="upper right")
    keys = [p.msprof_name for p in PIPE_ORDER]
    x = np.arange(len(keys))
    w = 0.8 / len(profs)
    for i, (prof, name) in enumerate(zip(profs, names)):
        ax2.bar(x - 0.4 + w * (i + 0.5), [prof.pipe_ratio.get(k, 0.0) for k in keys], w, color=colours[i],
                label=name, gid=f"pipe_ratio|{i}")
    ax2.set_xticks(x)
    ax2.set_xticklabels([PIPE_LABELS[p] for p in PIPE_ORDER], fontsize="small")
    ax2.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax2.set_ylim(0, 1.1)
    ax2.set_ylabel("busy ratio (% of kernel time)")
    ax2.set_xlabel("pipe")
    ax2.set_title("pipe busy ratio", loc="left", fontsize="medium")
    _legend(ax2, loc="upper right")
    fig.suptitle(f"{names[-1]} vs {names[0]}: {speed[-1]:.2f}x", x=0.07, ha="left", fontsize="large")
    return fig


def _register_notebook_display() -> None:
    """Let a bare Figure show inline in IPython even if pyplot (which installs that hook) was never
    imported; an existing hook (the inline backend's) is left alone."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    png = shell.display_formatter.formatters["image/png"]
    try:
        png.lookup_by_type(Figure)
    except KeyError:
        from IPython.core.pylabtools import print_figure

        png.for_type(Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


_register_notebook_display()

#: Charts by name, for the explorer and other tools.
CHARTS: dict[str, Callable[[Profile], Figure]] = {
    "timeline": timeline, "utilization": utilization, "bandwidth": bandwidth, "roofline": roofline,
    "occupancy": occupancy,
}
