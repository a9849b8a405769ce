"""Charts of a whole inference: pure functions ``ModelProfile(s) -> matplotlib Figure``.

As in :mod:`npusim.views.charts`, figures are built with :class:`matplotlib.figure.Figure` directly, never
through pyplot (nothing to close, nothing leaks), and every number drawn is read unchanged from the
:class:`~npusim.model.metrics.ModelProfile` (``events``, ``breakdown_us``, ``op_rows()``,
``mac_utilization``). Artists carry a ``gid`` so tests can find them.
"""

from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..errors import UsageError
from .. import chartstyle as _palette
from ..views import charts as _views_charts  # noqa: F401  (installs the inline display of bare Figures)
from .metrics import CATEGORIES, LABELS, ModelProfile, category
from .placement import placement, short_name  # noqa: F401  (the placement chart: its own module)
from .schedule import LANES
from ..chartstyle import readable

DPI = _views_charts.DPI
#: Colour of each breakdown category (and of the timeline bars of that kind).
COLOURS = _palette.CATEGORY_COLOURS
_LANE_LABELS = {"host": "host ops", "launch": "kernel launch", "PCIe": "PCIe copies", "device": "device kernels"}


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI)


def _profiles(profiles) -> list[ModelProfile]:
    profs = list(profiles) if isinstance(profiles, (list, tuple)) else [profiles]
    if not profs or not all(isinstance(p, ModelProfile) for p in profs):
        raise UsageError("expected a ModelProfile or a list of them (from npusim.model.run_model)")
    return profs


def _batch(profile: ModelProfile) -> str:
    """``", batch N"``, unless the run's label already says it (the story's runs do)."""
    return "" if f"batch {profile.batch}" in profile.label else f", batch {profile.batch}"


def _percent(profile: ModelProfile) -> str:
    t = profile.model_time_us or 1.0
    return ", ".join(f"{LABELS[k]} {v / t:.0%}" for k, v in profile.breakdown_us.items() if v > 0)


# --- timeline --------------------------------------------------------------------------------------

def timeline(profile: ModelProfile, title: str | None = None, baseline: ModelProfile | None = None) -> Figure:
    """The inference on one time axis: a lane each for host ops, kernel launches, PCIe copies and device
    kernels (``profile.events``), coloured by breakdown category. Spans thinner than a pixel are drawn
    as thin lines so that short kernels stay visible; host ops and copies wide enough carry their node.
    ``baseline``: the axis spans the longer of the two and a dashed line marks where the baseline ended."""
    (prof,) = _profiles(profile)
    t_end = max(prof.model_time_us, baseline.model_time_us if baseline is not None else 0.0) or 1.0
    fig = _figure(10.0, 3.6)
    ax = fig.add_axes((0.13, 0.2, 0.85, 0.52))
    min_w = t_end / 700  # about one pixel
    for y, lane in enumerate(LANES):
        lane_y = len(LANES) - 1 - y
        evs = [e for e in prof.events if e.lane == lane]
        by_cat: dict[str, list] = {}
        for e in evs:
            by_cat.setdefault(category(e), []).append((e.start_us, max(e.dur_us, min_w)))
        for cat, spans in by_cat.items():
            ax.broken_barh(spans, (lane_y - 0.38, 0.76), facecolors=COLOURS[cat], edgecolor="white",
                           linewidth=0.4, gid=f"lane|{lane}|{cat}")
        for e in evs:
            if e.kind not in ("host", "h2d", "d2h"):
                continue
            text = short_name(e.node) if e.kind == "host" else e.name.split()[0]
            span_px = e.dur_us / t_end * 0.85 * 10.0 * DPI            # the span's width in pixels
            if span_px > len(text) * _palette.MIN_POINTS * DPI / 72 * 0.62 + 6:  # only a name that fits its span
                ax.text(e.start_us + e.dur_us / 2, lane_y, text, ha="center", va="center", fontsize=_palette.MIN_POINTS,
                        color="white", clip_on=True)
    ax.set_yticks(range(len(LANES)))
    ax.set_yticklabels([_LANE_LABELS[lane] for lane in LANES][::-1])
    ax.set_ylim(-0.6, len(LANES) - 0.4)
    ax.set_xlim(0, t_end * 1.01)
    if baseline is not None:
        ax.axvline(baseline.model_time_us, color=_palette.ROLE["baseline"], ls="--", lw=1.2, gid="baseline_end")
        near_end = baseline.model_time_us > 0.8 * t_end  # centred there, the label would leave the figure
        ax.annotate("baseline end", (baseline.model_time_us, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2 if near_end else 0, 2), textcoords="offset points", fontsize="x-small",
                    va="bottom", ha="right" if near_end else "center", annotation_clip=False)
    ax.xaxis.set_major_locator(MaxNLocator(8))
    ax.set_xlabel("time since the batch was on the host (us)")
    ax.grid(axis="x", alpha=0.3)
    head = title or f"{prof.label}: whole-model timeline" + _batch(prof)
    ax.set_title(f"{head}\nmodel time {prof.model_time_us:,.0f} us | device busy {prof.device_busy_ratio:.1%} | "
                 f"Cube utilisation (chip) {prof.mac_utilization:.2%} | {prof.launches} launches, "
                 f"{prof.uploads + prof.downloads} copies", loc="left", fontsize="medium",
                 pad=14)  # room for the baseline's label
    handles = [Patch(color=COLOURS[c], label=LABELS[c]) for c in CATEGORIES if c != "idle"]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.0, -0.22), ncols=4, fontsize="small",
              frameon=False)
    return readable(fig)


# --- breakdown -------------------------------------------------------------------------------------

def breakdown(profiles, labels: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Stacked bars of ``breakdown_us`` (device compute, transfers, host, launch, idle), one bar per profile,
    labelled with the model time and the speed-up over the first (``time[0] / time[i]``)."""
    profs = _profiles(profiles)
    names = [str(x) for x in labels] if labels is not None else [p.label for p in profs]
    if len(names) != len(profs):
        raise UsageError(f"got {len(names)} label(s) for {len(profs)} profile(s)")
    height = 1.65 + 0.5 * len(profs)
    fig = _figure(9.0, height)
    bottom, top_margin = 1.05 / height, 0.4 / height  # inches: x label and legend below, title above
    ax = fig.add_axes((0.2, bottom, 0.76, 1 - bottom - top_margin))
    top = max(p.model_time_us for p in profs) or 1.0
    for i, (prof, name) in enumerate(zip(profs, names)):
        y = len(profs) - 1 - i
        left = 0.0
        for cat in CATEGORIES:
            v = prof.breakdown_us[cat]
            if v <= 0:
                continue
            ax.barh([y], [v], left=[left], height=0.62, color=COLOURS[cat], gid=f"breakdown|{i}|{cat}")
            if v > top / 14:
                ax.text(left + v / 2, y, f"{v:,.0f}", ha="center", va="center", fontsize="x-small",
                        color="white" if cat != "idle" else "black")
            left += v
        speed = profs[0].model_time_us / prof.model_time_us if prof.model_time_us else float("inf")
        extra = f"  {speed:.2f}x" if i else ""
        ax.text(left + top * 0.01, y, f"{prof.model_time_us:,.0f} us{extra}", va="center", fontsize="small",
                fontweight="bold" if i else "normal")
    ax.set_yticks(range(len(profs)))
    ax.set_yticklabels(names[::-1], fontsize="small")
    ax.set_xlim(0, top * 1.22)
    readable(fig)
    _room_for_names(ax)    # long run labels (the story's) at 9 pt: the axes start after them
    _fit_labels_right(ax)  # the totals at 9 pt: wider than a fixed margin
    ax.set_ylim(-0.6, len(profs) - 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.set_xlabel("model time (us), split by what ran (priority: device > copy > host > launch)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title or "Where the model time goes", loc="left", fontsize="medium")
    handles = [Patch(color=COLOURS[c], label=LABELS[c]) for c in CATEGORIES]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(-0.2, -0.62 / (height * (1 - bottom - top_margin))),
              ncols=5, fontsize="small", frameon=False)
    return readable(fig)


# --- utilisation ------------------------------------------------------------------------------------

def op_utilization(profile: ModelProfile) -> Figure:
    """Cube utilisation per Cube op (conv2d, linear), **of the whole chip**: of its main kernel
    (``kernel_chip_util``, as a lone kernel would be measured) and of all its kernels (``op_util``: with its
    layout transforms), against the model's (``mac_utilization``, dashed) and the device's while busy
    (``device_mac_utilization``, dotted); a dot marks the main kernel's utilisation of the cores it used
    (``kernel_util``). Log scale: the values differ by orders of magnitude."""
    (prof,) = _profiles(profile)
    rows = [r for r in prof.op_rows() if r["kernel_util"] is not None]
    many = len(rows) > 8  # a whole network: narrower labels, rotated, on a wider figure
    width = max(10.0, 4.4 + 0.45 * len(rows))   # rotated 9 pt labels of neighbouring bars clear each other
    fig = _figure(width, 4.4 if many else 3.6)
    ax = fig.add_axes((0.8 / width, 0.3 if many else 0.18, 1 - 4.4 / width, 0.58 if many else 0.66))
    xs = range(len(rows))
    w = 0.38
    k = [r["kernel_chip_util"] for r in rows]
    o = [r["op_util"] for r in rows]
    b1 = ax.bar([x - w / 2 for x in xs], k, w, color=_palette.series(1), label="main kernel alone (chip)",
                gid="kernel_chip_util")
    b2 = ax.bar([x + w / 2 for x in xs], o, w, color=_palette.series(2), label="op: kernel + layout transforms (chip)",
                gid="op_util")
    ax.scatter([x - w / 2 for x in xs], [r["kernel_util"] for r in rows], color="black", s=10, zorder=3,
               gid="kernel_util", label="main kernel, of the cores it used")
    turn = 90 if many else 0
    ax.axhline(prof.mac_utilization, color=_palette.ROLE["mac"], ls="--", gid="model_util",
               label=f"whole model (chip): {prof.mac_utilization:.2%}")
    ax.axhline(prof.device_mac_utilization, color=_palette.ROLE["achieved"], ls=":", gid="device_util",
               label=f"device while busy (chip): {prof.device_mac_utilization:.1%}")
    ax.set_yscale("log")
    lo = min([prof.mac_utilization, *[v for v in k + o if v > 0]] or [1e-4])
    ax.set_ylim(lo / 3, 4.0 if many else 1.5)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v * 100:g}%"))
    ax.set_xticks(list(xs))
    ax.set_xticklabels([short_name(r["node"]) + (f"\n+{'+'.join(r['fused'])}" if r["fused"] and not many else "")
                        for r in rows], fontsize="small", rotation=turn)
    ax.set_xlim(-0.6, max(len(rows), 1) - 0.4)
    # the value labels once the limits are final: inside the bar's top where the bar is tall enough (the
    # dot of the cores it used sits just above the main kernel's bar), else above the bar and its dot
    dots = [r["kernel_util"] for r in rows]
    _value_labels(ax, b1, k, turn, dots)
    _value_labels(ax, b2, o, turn, None)
    ax.set_ylabel("Cube MAC utilisation of the chip (log)")
    batch = f" (batch {prof.batch})" if _batch(prof) else ""
    ax.set_title(f"{prof.label}: kernels vs the whole model{batch}", loc="left", fontsize="medium")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    return readable(fig)


def _value_labels(ax, bars, values: list[float], rotation: int, dots: list[float] | None) -> None:
    """Label each bar with its value (``ax.text`` at the bar, ``gid="value"``): white inside the bar's top
    when the bar is taller than the label, else above the bar, and above its dot (``dots``) when the dot
    would sit in the label."""
    size = _palette.FONT["value"]
    px = size * ax.figure.dpi / 72                  # the label's line height in pixels
    for i, (bar, v) in enumerate(zip(bars, values)):
        label = f"{v:.1%}"
        long = px * 0.62 * len(label) + 6            # the label's extent along the bar when rotated
        need = (long if rotation else px) + 6
        x = bar.get_x() + bar.get_width() / 2
        base, top = (ax.transData.transform((x, y))[1] for y in (ax.get_ylim()[0], v))
        if top - base >= need:
            ax.annotate(label, (x, v), xytext=(0, -3), textcoords="offset points", ha="center", va="top",
                        rotation=rotation, fontsize=size, color="white", gid="value")
            continue
        above = v
        if dots is not None and dots[i] is not None:
            dot = ax.transData.transform((x, dots[i]))[1]
            if dot - top < need + 4:                 # the dot would be in the label: go above the dot
                above = max(v, dots[i])
        ax.annotate(label, (x, above), xytext=(0, 5 if above != v else 2), textcoords="offset points",
                    ha="center", va="bottom", rotation=rotation, fontsize=size, gid="value")


def _room_for_names(ax, pad_px: float = 12.0) -> None:
    """Move ``ax``'s left edge right of its longest y tick label (keeping its right edge)."""
    fig = ax.figure
    fig.draw_without_rendering()
    widest = max((t.get_window_extent().width for t in ax.get_yticklabels() if t.get_text()), default=0.0)
    p = ax.get_position()
    left = max(p.x0, (widest + pad_px + 6) / fig.bbox.width)   # 6 px: the tick itself
    ax.set_position((left, p.y0, p.x1 - left, p.height))


def _fit_labels_right(ax) -> None:
    """Widen ``ax``'s x limits (from 0) until every text placed in data coordinates ends inside the axes."""
    ax.figure.draw_without_rendering()
    frame = ax.get_window_extent()
    lo, hi = ax.get_xlim()
    need = hi
    for t in ax.texts:
        box = t.get_window_extent()
        if box.x1 > frame.x1 - 4:
            x = t.get_position()[0]
            room = frame.width - (box.x1 - box.x0) - 6    # pixels left for the bar up to the label
            if room > 0:
                need = max(need, lo + (x - lo) * frame.width / room)
    ax.set_xlim(lo, need)


#: Charts by name, for the explorer.
CHARTS = {"timeline": timeline, "breakdown": breakdown, "op_utilization": op_utilization}
