"""The roofline of one or several kernels on the configured core."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..errors import UsageError
from ..chartstyle import point
from .style import ROLE, ROOF_COLOURS, as_profile, figure, legend_right, names
from .style import readable


def roofs(cfg, n: int, dtypes: Sequence[str] = ()) -> list[tuple[str, float]]:
    """Compute roofs (label, FLOP/s) of ``n`` cores: Cube fp16, Cube fp32 where supported, the Cube at any
    other input dtype in ``dtypes`` (e.g. int8, twice fp16's MACs), Vector fp16."""
    out = [("Cube fp16", cfg.cube_peak_flops("float16") * n)]
    if "float32" in cfg.cube_macs_per_cycle:
        out.append(("Cube fp32", cfg.cube_peak_flops("float32") * n))
    for dt in sorted(set(dtypes) - {"float16", "float32"}):
        if dt in cfg.cube_macs_per_cycle:
            out.append((f"Cube {_SHORT.get(dt, dt)}", cfg.cube_peak_flops(dt) * n))
    out.append(("Vector fp16", cfg.vector_peak_flops("float16") * n))
    return out


_SHORT = {"int8": "int8", "bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def memory_roofs(cfg, n: int, write_pipes: int = 1) -> list[tuple[str, str, float]]:
    """Memory roofs (key, label, GM bytes/s) of ``n`` cores, as the cost model bounds GM traffic
    (``Profile.memory_bound_cycles``): reads (MTE2) take a core's port from HBM (``gm_rate``: the port,
    capped by an equal share of the chip's HBM) or ``l2_bytes_per_cycle`` for bytes found in L2; each write
    pipe (MTE3 from UB, FIX from L0C) has a port of its own. So the slopes are: reads from HBM; reads from
    L2 (where it differs); and "all ports": L2 reads plus ``write_pipes`` write ports at once, which no mix of
    reads and writes can beat."""
    clock = cfg.clock_ghz * 1e9
    hbm = cfg.gm_rate(n) * n * clock
    l2 = cfg.l2_bytes_per_cycle * n * clock
    out = [("HBM", f"reads from HBM (MTE2) {hbm / 1e9:,.0f} GB/s", hbm)]
    if abs(l2 / hbm - 1) > 0.01:
        out.append(("L2", f"reads from L2 (MTE2) {l2 / 1e9:,.0f} GB/s", l2))
    ports = max(l2, hbm) + write_pipes * cfg.gm_port_bytes_per_cycle * n * clock
    out.append(("all ports", f"all ports: reads + writes {ports / 1e9:,.0f} GB/s", ports))
    return out


def _write_pipes(profs) -> int:
    """How many GM write pipes (MTE3, FIX) the launches use (at least one)."""
    from ..profile import PATHS

    return max(1, len({PATHS[k] for p in profs for k in p.path_bytes if k.endswith("->GM") and k in PATHS}))


def _decimal(v: float, scale: float = 1.0) -> str:
    """A tick as a plain decimal number (0.01, 0.1, 1, 10, 1000), never "100 m" or "1e+03"."""
    x = v / scale
    if x <= 0:
        return ""
    digits = max(0, -math.floor(math.log10(x) + 1e-9))
    return f"{x:,.{digits}f}"


def _decades(lo: float, hi: float) -> tuple[float, float, list[float]]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return 10.0 ** a, 10.0 ** b, [10.0 ** k for k in range(a, b + 1)]


def _label_roofs(ax, roofs_: list[tuple[float, str, str]], x_hi: float, y_lo: float, y_hi: float) -> None:
    """Write each roof's name and peak on its line: above it, or below when the label above would touch
    another; roofs of equal peak share one label."""
    px = ax.get_position().height * ax.figure.get_figheight() * ax.figure.dpi
    label = 11.0 / px * math.log10(y_hi / y_lo)  # a label's height, in decades
    taken: list[tuple[float, float]] = []
    merged: list[list] = []
    for peak, name, colour in sorted(roofs_, key=lambda r: -r[0]):
        if merged and abs(math.log10(merged[-1][0] / peak)) < 0.005:
            merged[-1][1].append(name)
        else:
            merged.append([peak, [name], colour])
    for peak, names_, colour in merged:
        y = math.log10(peak)
        above, below = (y + 0.02, y + 0.02 + label), (y - 0.02 - label, y - 0.02)
        free = not any(lo < above[1] and above[0] < hi for lo, hi in taken)
        span = above if free else below
        taken.append(span)
        ax.text(x_hi / 1.15, peak * (1.05 if free else 1 / 1.05), f"{' = '.join(names_)}: {peak / 1e12:,.3g} TFLOP/s",
                ha="right", va="bottom" if free else "top", fontsize="x-small", color=colour, gid="roof_label")


def _clear_points(ax, x_lo: float) -> None:
    """Move a roof label that covers a kernel's point or tick: below its roof instead of above (or above
    instead of below), else to the roof's left end, where it starts at the ridge, else left of the ridge at
    the roof's height, then the same places on two lines; the first place clear of every marker and of the
    other labels wins (when none is, the label stays where it was)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = RendererAgg(*(int(v) for v in fig.bbox.size), fig.dpi)   # measures text without drawing
    marks = []
    for line in ax.lines:
        if (line.get_gid() or "").startswith(("point|", "own_roof|", "baseline")):
            r = line.get_markersize() * fig.dpi / 72 / 2
            ry = line.get_markeredgewidth() * fig.dpi / 72 / 2 if line.get_marker() == "_" else r   # a tick
            for x, y in ax.transData.transform(np.column_stack(line.get_data())):
                marks.append(Bbox.from_extents(x - r, y - ry, x + r, y + ry))
    labels = [t for t in ax.texts if t.get_gid() == "roof_label"]

    frame = ax.get_window_extent(renderer)

    def clear(t) -> bool:
        box = t.get_window_extent(renderer)
        return frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) and not any(Bbox.intersection(box, m) is not None for m in marks) and not any(
            Bbox.intersection(box, o.get_window_extent(renderer)) is not None for o in labels if o is not t)

    for t in labels:
        if clear(t):
            continue
        x, y = t.get_position()
        peak = y / 1.05 if t.get_va() == "bottom" else y * 1.05
        start = next((ln.get_xdata()[0] for ln in ax.lines if (ln.get_gid() or "").startswith("roof|")
                      and abs(ln.get_ydata()[0] / peak - 1) < 0.01), x_lo)
        flip = "top" if t.get_va() == "bottom" else "bottom"
        # below/above at the right end; at the roof's left end; left of the ridge, where the slopes are lower
        places = [(x, flip, "right"), (start * 1.1, "bottom", "left"), (start * 1.1, "top", "left"),
                  (start / 1.15, "center", "right")]
        text = t.get_text()
        tries = [(text, *p) for p in places] + [(text.replace(": ", ":\n", 1), *p) for p in [(x, t.get_va(), "right"),
                                                                                          *places]]
        for words, px, va, ha in tries:   # then on two lines: half as wide
            t.set_text(words)
            t.set_position((px, peak * {"bottom": 1.05, "top": 1 / 1.05}.get(va, 1.0)))
            t.set_va(va)
            t.set_ha(ha)
            if clear(t):
                break
        else:
            t.set_text(text)
            t.set_position((x, y))
            t.set_va("bottom" if flip == "top" else "top")
            t.set_ha("right")


def roofline(profiles: Any, labels: Sequence[str] | None = None, config=None, baseline: Any = None) -> Figure:
    """Roofline (log-log) of one or several kernels on the configured core.

    Memory roofs are the slopes the cost model has (:func:`memory_roofs`): GM reads from HBM, from L2, and
    all ports at once (reads and writes have ports of their own); each compute roof (Cube fp16, Cube fp32
    where the preset has it, Vector fp16) is a flat line, labelled on the line. Kernels are points at
    ``(arithmetic_intensity, achieved_flops)``; each has a tick of its colour at its own roof,
    ``Profile.attainable_flops`` (its work and its bytes per path at their peaks: it cannot be above it).
    Ticks are plain decimals (FLOP per byte; TFLOP/s). ``config`` defaults to the first profile's.
    ``baseline`` (a Profile): drawn as a hollow black point.
    """
    from ..config import get_config

    profs = [as_profile(p) for p in (profiles if isinstance(profiles, (list, tuple)) else [profiles])]
    if not profs:
        raise UsageError("roofline needs at least one profile")
    labels_ = names(profs, labels)
    base = as_profile(baseline) if baseline is not None else None
    cfg = get_config(config) if config is not None else profs[0].config
    cores = sorted({p.active_cores for p in profs})
    dtypes = [p.cube_dtype for p in profs if p.cube_dtype]
    fig = figure(10.5, 4.8)
    ax = fig.add_axes((0.095, 0.12, 0.44, 0.74))
    ax.set_xscale("log")
    ax.set_yscale("log")

    def ok(p) -> bool:
        return bool(np.isfinite(p.arithmetic_intensity) and p.arithmetic_intensity > 0 and p.achieved_flops > 0)

    shown = [p for p in profs + ([base] if base else []) if ok(p)]
    finite = [(p.arithmetic_intensity, p.achieved_flops) for p in shown]
    writes = _write_pipes(profs + ([base] if base else []))
    mem = {n: memory_roofs(cfg, n, writes) for n in cores}
    slowest = {n: min(r for _, _, r in mem[n]) for n in cores}
    ridges = [peak / slowest[n] for n in cores for _, peak in roofs(cfg, n, dtypes)]
    peaks = [peak for n in cores for _, peak in roofs(cfg, n, dtypes)]
    x_lo, x_hi, xticks = _decades(min([x for x, _ in finite] + ridges) / 3, max([x for x, _ in finite] + ridges) * 6)
    y_lo, y_hi, yticks = _decades(min([y for _, y in finite] + [x_lo * min(slowest.values())]) / 2, max(peaks) * 4)
    labels_at: list[tuple[float, str, str]] = []  # (peak, text, colour) of each roof
    for n in cores:
        suffix = f" ({n} core{'s' if n > 1 else ''})" if len(cores) > 1 else ""
        top = max(peak for _, peak in roofs(cfg, n, dtypes))
        for key, label, rate in mem[n]:
            ax.plot([x_lo, top / rate], [x_lo * rate, top], "-" if key != "all ports" else "--",
                    color=ROOF_COLOURS[key], lw=1.4, label=f"{label}{suffix}", gid=f"gm|{key}|{n}")
        for name, peak in roofs(cfg, n, dtypes):
            colour = ROOF_COLOURS.get(name, ROOF_COLOURS["Cube fp16"])
            ax.plot([peak / mem[n][-1][2], x_hi], [peak, peak], "-", color=colour, lw=1.8, gid=f"roof|{name}|{n}")
            labels_at.append((peak, f"{name}{suffix}", colour))
    _label_roofs(ax, labels_at, x_hi, y_lo, y_hi)
    skipped = []
    for i, (prof, name) in enumerate(zip(profs, labels_)):
        if not ok(prof):
            skipped.append(name)
            continue
        c = point(i)
        x, y, roof = prof.arithmetic_intensity, prof.achieved_flops, prof.attainable_flops
        ax.plot([x, x], [y, roof], ":", color=c, lw=1.2, gid=f"headroom|{i}")
        ax.plot([x], [roof], "_", color=c, markersize=14, markeredgewidth=2.2, gid=f"own_roof|{i}")
        ax.plot([x], [y], "o", color=c, markersize=8, label=f"{name} ({prof.bound}-bound, {y / roof:.0%} of roof)",
                gid=f"point|{i}")
    if base is not None and ok(base):
        ax.plot([base.arithmetic_intensity], [base.achieved_flops], "o", color=ROLE["baseline"], mfc="none",
                mec=ROLE["baseline"], mew=1.8, markersize=11, label="baseline", gid="baseline")
    ax.plot([], [], "_", color="#333333", markersize=14, markeredgewidth=2.2,
            label="tick: its own roof (reads, writes, L2 hits)")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    for axis, ticks, scale in ((ax.xaxis, xticks, 1.0), (ax.yaxis, yticks, 1e12)):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())  # minor log ticks cost drawing time and carry no label
        axis.set_major_formatter(FuncFormatter(lambda v, _, s=scale: _decimal(v, s)))
    ax.set_xlabel("arithmetic intensity (FLOP per GM byte)")
    ax.set_ylabel("performance (TFLOP/s)")
    ax.grid(which="major", alpha=0.3)
    title = f"Roofline on {cfg.name}, " + " / ".join(f"{n} core{'s' if n > 1 else ''}" for n in cores)
    if skipped:
        title += f"\nnot plotted (no FLOPs or no GM traffic): {', '.join(skipped)}"
    ax.set_title(title, loc="left", fontsize="medium")
    legend_right(ax)
    readable(fig)
    _clear_points(ax, x_lo)   # at the labels' final size
    return fig
