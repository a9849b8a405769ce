"""A picture of the AI core drawn from a HardwareConfig: memories with their sizes, units with their peaks,
and the data paths with the pipe that drives each and its rate."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..config import HardwareConfig, get_config
from .style import register_notebook_display
from .style import readable

register_notebook_display()  # a bare Figure shows inline

_MEM = "#dbe9f6"
_UNIT = "#fde2c8"
_GM = "#e6e6e6"
_LABEL_BOX = {"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none"}


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n // 1024} KB"


def core_diagram(config: HardwareConfig | str | None = None) -> Figure:
    """The memory hierarchy and data paths of one AI core, with the L2 and HBM the chip's cores share."""
    cfg = get_config(config)
    fig = Figure(figsize=(10, 5.6))
    ax = fig.add_axes((0, 0, 1, 0.92))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 62)
    ax.axis("off")
    ghz = cfg.clock_ghz
    boxes = {}

    def box(key, x, y, w, h, title, sub, color):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.4", fc=color, ec="#555"))
        ax.text(x + w / 2, y + h * 0.62, title, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x + w / 2, y + h * 0.28, sub, ha="center", va="center", fontsize=8)
        boxes[key] = (x, y, w, h)

    def arrow(a, b, label, side_a="right", side_b="left", dy=0.0):
        def anchor(key, side):
            x, y, w, h = boxes[key]
            return {"right": (x + w + 0.6, y + h / 2 + dy), "left": (x - 0.6, y + h / 2 + dy),
                    "top": (x + w / 2, y + h + 0.6), "bottom": (x + w / 2, y - 0.6)}[side]
        p, q = anchor(a, side_a), anchor(b, side_b)
        ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=12, color="#333", lw=1.2))
        # on a white patch, so an arrow never runs through its own or a neighbour's label
        ax.text((p[0] + q[0]) / 2, (p[1] + q[1]) / 2 + 1.2, label, ha="center", fontsize=7.5, color="#223",
                bbox=_LABEL_BOX, zorder=3)

    def route(points, label, label_at=0):
        """An arrow along a polyline (for paths that go around other boxes)."""
        xs, ys = zip(*points)
        ax.plot(xs[:-1], ys[:-1], color="#333", lw=1.2)
        ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=12,
                                     color="#333", lw=1.2))
        (x0, y0), (x1, y1) = points[label_at], points[label_at + 1]
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + 1.0, label, ha="center", fontsize=7.5, color="#223",
                bbox=_LABEL_BOX, zorder=3)

    gm_rate = cfg.gm_rate(1)
    l2_rate = cfg.l2_bytes_per_cycle
    box("GM", 1, 20, 12, 20, "L2 (GM)", f"{_size(cfg.l2_bytes)}\nshared by\n{cfg.num_cores} cores\nMTE2 hit/miss", _GM)
    box("HBM", 1, 1, 12, 11, "HBM", f"{cfg.hbm_gb_per_s:.0f} GB/s\nfor the chip", _GM)
    arrow("HBM", "GM", "", side_a="top", side_b="bottom")
    ax.text(7.6, 15.6, "misses,\nwrite-backs", ha="left", fontsize=7, color="#223")
    box("L1", 26, 40, 14, 10, "L1", _size(cfg.l1_bytes), _MEM)
    box("UB", 26, 6, 14, 10, "Unified Buffer", _size(cfg.ub_bytes), _MEM)
    box("L0A", 50, 48, 12, 8, "L0A", _size(cfg.l0a_bytes), _MEM)
    box("L0B", 50, 34, 12, 8, "L0B", _size(cfg.l0b_bytes), _MEM)
    cube_tf = cfg.cube_peak_flops("float16") / 1e12
    box("Cube", 70, 40, 12, 12, "Cube", f"{cfg.cube_macs_per_cycle['float16']} MAC/cycle\n{cube_tf:.1f} TFLOPS fp16",
        _UNIT)
    box("L0C", 86, 40, 11, 12, "L0C", _size(cfg.l0c_bytes), _MEM)
    vec_tf = cfg.vector_peak_flops("float16") / 1e12
    box("Vector", 54, 6, 14, 10, "Vector", f"{cfg.vector_bytes_per_cycle} B/cycle\n{vec_tf:.2f} TFLOPS fp16", _UNIT)
    box("Scalar", 76, 8, 16, 8, "Scalar", "issues every instruction", _UNIT)

    mte2 = f"MTE2  {l2_rate * ghz:.0f} / {gm_rate * ghz:.0f} GB/s"
    arrow("GM", "L1", mte2, dy=4)
    route([(13.6, 26), (21, 26), (21, 13), (25.4, 13)], mte2, label_at=1)
    route([(25.4, 9), (17, 9), (17, 22), (13.6, 22)], f"MTE3  {gm_rate * ghz:.0f} GB/s", label_at=0)
    arrow("L1", "L0A", f"MTE1 {cfg.l1_to_l0a_bytes_per_cycle * ghz:.0f} GB/s")
    arrow("L1", "L0B", f"MTE1 {cfg.l1_to_l0b_bytes_per_cycle * ghz:.0f} GB/s")
    arrow("L0A", "Cube", "M")
    arrow("L0B", "Cube", "M")
    arrow("Cube", "L0C", "")
    arrow("UB", "Vector", "V")
    if cfg.has_fixpipe:
        route([(91.5, 52.6), (91.5, 59), (7, 59), (7, 40.6)],
              f"FIX (Fixpipe): L0C -> GM {cfg.fixpipe_bytes_per_cycle * ghz:.0f} GB/s, "
              f"with cast / ReLU / dequant on the way", label_at=1)
    else:
        route([(91.5, 39.4), (91.5, 24), (33, 24), (33, 16.6)],
              f"V: L0C -> UB {cfg.l0c_to_ub_bytes_per_cycle * ghz:.0f} GB/s (no Fixpipe: cast/ReLU are "
              f"vector work)", label_at=1)
    fig.suptitle(f"One AI core of preset '{cfg.name}' at {ghz:g} GHz (rates per core; L2 and HBM shared by the chip)",
                 fontsize=11)
    return readable(fig)
