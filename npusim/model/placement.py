"""The placement chart: where each op of a graph runs and which tensors cross PCIe, readable at any size.

The nodes run left to right in execution order, wrapped into strips of ``per_row`` nodes like lines of
text; each strip has a device lane (top) and a host lane (bottom). Boxes are dark text on a light fill,
blue-edged on the device and orange-edged on the host, so the sides show at a glance and the names stay
legible at 100 % zoom (9 CSS pt, never rotated). Every PCIe copy that the placement implies
(:meth:`Graph.crossings`: a tensor read on the other side, copied once per direction) is a red arrow with
its number, so the copies can be counted; a later reader of the same copy gets a thin dotted line. The
numbers of a strip read left to right in execution order, none on a box or another number.
Edges inside a strip are drawn (a residual skip as an arc); an edge from an earlier strip, and a copy that
skips columns, run in the band outside their source's lane and turn into their reader at its column (an
edge from an earlier strip names its producer).
"""

from __future__ import annotations

import re

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..chartstyle import CATEGORY_COLOURS
from ..views import charts as _views_charts  # noqa: F401  (installs the inline display of bare Figures)
from .graph import DEVICE, HOST, Graph
from ..chartstyle import readable

DPI = _views_charts.DPI
FILL = {DEVICE: "#deebf7", HOST: "#fee6ce", "end": "#f2f2f2"}
EDGE = {DEVICE: CATEGORY_COLOURS["device"], HOST: CATEGORY_COLOURS["host"], "end": "#333333"}
COPY = CATEGORY_COLOURS["transfers"]
FONT = 8.0
SLOT_IN, STRIP_IN = 1.12, 1.42  # inches per node slot and per strip


def short_name(name: str) -> str:
    """A node name as the charts print it: ``layer2_0_downsample_0`` -> ``2.0 down conv``, ``layer1_1_relu_1``
    -> ``1.1 relu_1``; other names unchanged."""
    m = re.fullmatch(r"layer(\d+)_(\d+)_(.+)", name)
    if not m:
        return name
    rest = {"downsample_0": "down conv", "downsample_1": "down bn"}.get(m.group(3), m.group(3))
    return f"{m.group(1)}.{m.group(2)} {rest}"


def placement(graph: Graph, title: str | None = None, per_row: int = 12) -> Figure:
    """The placement chart of ``graph`` (module docstring), ``per_row`` nodes per strip."""
    items = [n for n in graph.nodes if n.op not in ("input", "output")]
    ins = [n for n in graph.nodes if n.op == "input"]
    out = [n for n in graph.nodes if n.op == "output"]
    order = ins + items + out
    per_row = max(2, min(per_row, len(order)))
    pos = {n.name: divmod(i, per_row) for i, n in enumerate(order)}      # name -> (strip, column)
    side = {n.name: (HOST if n.op in ("input", "output") else n.placement) for n in order}
    strips = -(-len(order) // per_row)

    width = 1.0 + per_row * SLOT_IN
    height = 0.95 + strips * STRIP_IN
    fig = Figure(figsize=(width, height), dpi=DPI)
    ax = fig.add_axes((0.0, 0.45 / height, 1.0, 1 - 0.9 / height))
    ax.set_xlim(-1.12, per_row - 0.4)   # room for the lane names at 9 pt
    ax.set_ylim(-3 * strips + 1.35, 1.0 + BAND + 0.4)   # the top band too
    ax.axis("off")

    def xy(name: str) -> tuple[float, float]:
        s, c = pos[name]
        return c, -3 * s + (1.0 if side[name] == DEVICE else 0.0)

    for s in range(strips):
        for lane, y in ((DEVICE, 1.0), (HOST, 0.0)):
            ax.text(-0.57, -3 * s + y, "device" if lane == DEVICE else "host", ha="right", va="center",
                    fontsize=FONT, color=EDGE[lane], fontweight="bold")
        ax.plot([-0.45, per_row - 0.45], [-3 * s + 0.5] * 2, color="#d9d9d9", lw=0.6, zorder=0)

    crossings = graph.crossings()
    copies = {(t, node): i + 1 for i, (t, _, node) in enumerate(crossings)}
    spots = _badge_x(copies, pos)
    for n in order:
        for t in dict.fromkeys(n.inputs):
            _edge(ax, t, n.name, xy, pos, side, copies.get((t, n.name)), per_row, spots.get((t, n.name)))
    for n in order:
        x, y = xy(n.name)
        kind = side[n.name] if n.op not in ("input", "output") else "end"
        label = "batch" if n.op == "input" else "result" if n.op == "output" else short_name(n.name)
        ax.text(x, y, label, ha="center", va="center", fontsize=FONT, color="black", zorder=3, gid=f"node|{n.name}",
                bbox={"boxstyle": "round,pad=0.25", "fc": FILL[kind], "ec": EDGE[kind], "lw": 1.2})

    n_dev = sum(1 for n in items if n.placement == DEVICE)
    ups = sum(1 for _, d, _ in crossings if d == "h2d")
    downs = len(copies) - ups
    head = title or f"{graph.name}: where each op runs"
    fig.text(0.01, 1 - 0.12 / height, f"{head} | {n_dev} ops on the device, {len(items) - n_dev} on the host | "
             f"{len(copies)} PCIe copies ({ups} up, {downs} down: red, numbered)", ha="left", va="top",
             fontsize="medium")
    handles = [Patch(fc=FILL[DEVICE], ec=EDGE[DEVICE], label="runs on the device (NPU)"),
               Patch(fc=FILL[HOST], ec=EDGE[HOST], label="runs on the host (CPU)"),
               Line2D([], [], color=COPY, lw=1.8, label="PCIe copy (numbered)"),
               Line2D([], [], color="#969696", lw=0.9, label="tensor stays where it is"),
               Line2D([], [], color=COPY, lw=0.9, ls=":", label="reads a copy made earlier")]
    fig.legend(handles=handles, loc="lower left", bbox_to_anchor=(0.01, 0.0), ncols=5, fontsize="small",
               frameon=False)
    return readable(fig)


#: How far (in lanes) the band outside a lane is, where long edges and edges from an earlier strip run.
BAND = 0.72


def _edge(ax, src: str, dst: str, xy, pos, side, number: int | None, per_row: int,
          badge_x: float | None = None) -> None:
    """One edge ``src -> dst``: grey, or red when it crosses sides (thick and numbered when it is the copy).
    An edge from an earlier strip, or a copy that skips columns, runs in the band outside its source's lane
    (below the host lane, above the device lane) and rises or drops into its reader at the reader's column,
    whose slot in the other lane is free: it crosses no box, and its number sits at ``badge_x`` on that band
    so that the numbers read in order from left to right."""
    (s0, c0), (s1, c1) = pos[src], pos[dst]
    x0, y0 = xy(src)
    x1, y1 = xy(dst)
    cross = side[src] != side[dst]
    colour, lw, ls = ((COPY, 1.8, "-") if number else (COPY, 0.9, ":")) if cross else ("#969696", 0.9, "-")
    style = {"arrowstyle": "-|>", "color": colour, "lw": lw, "ls": ls, "shrinkA": 12, "shrinkB": 12,
             "mutation_scale": 9}
    gid = "copy" if number else ("copy-reuse" if cross else "edge")
    lane0 = y1 + (y0 - y1) if s0 == s1 else (y1 if not cross else y1 + (-1.0 if side[dst] == DEVICE else 1.0))
    band = lane0 + (-BAND if side[src] == HOST else BAND)
    badge = None
    if s0 != s1 or (cross and c1 - c0 > 1):
        if s0 != s1:  # from an earlier strip: a stub in the band, named after its producer
            xs = x1 - 0.95
            pts_x, pts_y = [xs, x1], [band, band]
            if not (c1 == 0 and c0 == per_row - 1 and s0 == s1 - 1):  # not simply the node before, wrapped
                name = f"from {short_name(src)}"
                right = xs - 0.05 - 0.08 * len(name) < -0.9   # no room on the left: beside the stub's end
                ax.text(x1 + 0.12 if right else xs - 0.05, band, name, ha="left" if right else "right",
                        va="center", fontsize=FONT - 1.5, color=colour, zorder=2)
        else:         # a copy past other columns: down (or up) into the band, along it, then into its reader
            pts_x, pts_y = [x0, x0, x1], [y0 + (0.3 if band > y0 else -0.3), band, band]
        ax.plot(pts_x, pts_y, color=colour, lw=lw, ls=ls, zorder=2, gid=gid)
        ax.annotate("", (x1, y1), (x1, band), gid=gid, zorder=2, arrowprops={**style, "shrinkA": 0})
        badge = (badge_x if badge_x is not None else x1 - 0.5, band)
    else:
        start = (x0, y0)
        badge = ((x0 + x1) / 2, (y0 + y1) / 2)
        # a skip inside a lane: an arc above the device lane (below the host lane), at most half a lane high
        rad = 0.0 if c1 - c0 <= 1 or cross else (-1 if side[dst] == DEVICE else 1) * 0.45 / (c1 - c0)
        ax.annotate("", (x1, y1), start, gid=gid, zorder=2, arrowprops={**style, "connectionstyle": f"arc3,rad={rad}"})
    if number:
        ax.text(*badge, str(number), ha="center", va="center", fontsize=FONT - 1,
                color="white", fontweight="bold", zorder=4, gid=f"copy|{number}",
                bbox={"boxstyle": "circle,pad=0.1", "fc": COPY, "ec": "none"})


def _badge_x(copies: dict, pos: dict) -> dict:
    """Where the number of each copy that runs in a band goes: the copies into one reader come in input
    order, so a band copy sits left of its reader's copy from the column before when it is numbered first
    (``x - 0.72``), else right of it (``x - 0.28``)."""
    out = {}
    for (t, node), number in copies.items():
        (s0, c0), (s1, c1) = pos[t], pos[node]
        if s0 == s1 and c1 - c0 <= 1:
            continue
        later_adjacent = any(n2 > number and nd == node and pos[t2][0] == s1 and pos[t2][1] == c1 - 1
                             for (t2, nd), n2 in copies.items())
        out[(t, node)] = c1 - (0.72 if later_adjacent else 0.28)
    return out
