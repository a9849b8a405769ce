"""How every chart of the course looks: its colours, each with one meaning, and its smallest text.

(A foundation module, pure data and one helper: the charts of every layer, ``views``, ``conv``'s fusion
chart, ``torch`` and ``model``, take their colours and text size from here.)

Colours, defined once.

Five kinds of thing are coloured, and no colour belongs to two of them (:func:`check_disjoint`, tested):

- :data:`FAMILY_COLOURS`: an operation family in a timeline (``data_copy``, ``mmad``, vector arithmetic...);
- :data:`PATH_COLOURS`: a data path of the core (GM->UB, GM->L1, L0C->GM, UB->GM...), e.g. GM bytes by path;
- :data:`SERIES_COLOURS`: runs or kernels side by side (compare, separate vs fused, kernel vs op), in order;
- :data:`ROOF_COLOURS`: the roofs of a roofline (compute peaks and memory slopes);
- :data:`POINT_COLOURS`: the kernels plotted on a roofline, in order;

plus :data:`ROLE` (what a bar or line stands for: achieved, peak, baseline, capacity...),
:data:`RANGE_COLOURS` (ranges of a number format, a phase of a run) and :data:`CATEGORY_COLOURS` (where the
time of a whole inference goes: device, PCIe transfers, host...). A chart
names what its colours mean on the chart itself (a legend, a key beside the data, or labels on the lines),
so the same colour reads the same in every lab: purple is ``mmad`` and nothing else.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Operation families (the timeline's legend), by the family's label (see ``style.FAMILIES``).
FAMILY_COLOURS: dict[str, str] = {
    "data_copy (GM, L1, UB)": "#1f77b4", "data_copy_pad": "#aec7e8", "load_data (L1 -> L0)": "#17becf",
    "mmad (Cube)": "#9467bd", "fixpipe": "#8c564b", "vector arithmetic": "#2ca02c",
    "vector exp/ln/sqrt/1/x": "#98df8a", "reduce_max / reduce_sum": "#ff7f0e", "cast / compare / select": "#bcbd22",
    "scalar issue": "#7f7f7f", "get_value / set_value": "#c5b0d5", "other": "#e377c2",
}
#: Data paths of the core: reads from GM in yellows and tans, writes to GM in pinks, on-chip moves in teals.
PATH_COLOURS: dict[str, str] = {
    "GM->UB": "#fee08b", "GM->L1": "#d8b365", "L0C->GM": "#f1b6da", "UB->GM": "#de77ae",
    "L1->L0A": "#c7eae5", "L1->L0B": "#80cdc1", "L1->UB": "#35978f", "L0C->UB": "#01665e", "UB->UB": "#e0e0e0",
}
#: Runs or kernels side by side, in order: the first is the reference (dark grey). They share charts and
#: explorers with the families and paths (lab 06: a timeline beside the separate-vs-fused bars), so each is
#: far from every family and path colour to the eye, not only as a hex code (:func:`check_distinct`): no
#: "conv kernel" bar in a blue that reads as ``data_copy``'s.
SERIES_COLOURS: tuple[str, ...] = ("#4d4d4d", "#2b2bd9", "#d62ad6", "#4f6000", "#b3003c", "#ff8877", "#6a00b0",
                                   "#000080")
#: Roofs of a roofline: compute peaks in reds and a dark green (vector), memory slopes in greys and black.
ROOF_COLOURS: dict[str, str] = {
    "Cube fp16": "#a50f15", "Cube fp32": "#fb6a4a", "Cube int8": "#67000d", "Cube bf16": "#ef3b2c",
    "Vector fp16": "#00441b", "HBM": "#252525", "L2": "#737373", "all ports": "#a3a3a3",
}
#: Kernels on a roofline, in order (ColorBrewer Dark2).
POINT_COLOURS: tuple[str, ...] = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
                                  "#666666")
#: What a bar or line stands for, the same in every chart.
ROLE: dict[str, str] = {
    "achieved": "#3b4f6b",      # a measured rate or ratio of this launch
    "peak": "#cfcfcf",          # the hardware's peak
    "mac": "#b8860b",           # Cube MAC utilisation
    "baseline": "#000000",      # the pinned baseline (markers and lines)
    "critical": "#6a3d9a",      # the critical pipe's outline
    "capacity": "#e31a1c",      # a memory's capacity
    "reserved": "#595959",      # bytes a program reserved
    "chip": "#e7298b",          # the chip's HBM peak, marked on a per-core chart
}
#: Where the time of a whole inference goes (``npusim.model``): also the placement chart's sides.
CATEGORY_COLOURS: dict[str, str] = {"device": "#08519c", "transfers": "#cb181d", "host": "#fd8d3c",
                                    "launch": "#9a9a9a", "idle": "#eeeeee"}
#: Ranges of a number format shaded behind a chart (fp16: rounds to 0, subnormal, overflows to inf), and a
#: phase of a run (backward).
RANGE_COLOURS: dict[str, str] = {"fp16: rounds to 0": "#54278f", "fp16: subnormal": "#fdbf6f", "fp16: inf": "#fb9a99",
                                 "backward": "#ffff99"}
#: Neutral greys for structure (grids, separators, faded entries): they carry no meaning.
NEUTRAL = frozenset({"#999999", "#d9d9d9", "#969696", "#ffffff", "#333333", "#bbbbbb", "#b0b0b0"})

#: Resolution figures are made for (``views.style.DPI``).
DPI = 80
#: Font sizes in points of a figure at :data:`DPI`, the smallest first. A notebook shows a PNG at its pixel
#: size (1 CSS px per pixel at 100 % zoom), and 1 CSS pt = 96/72 px, so a text of ``s`` pt at 80 dpi reads as
#: ``s * 80 / 96`` CSS pt: :data:`MIN_POINTS` = 10.8 pt reads as 9 pt. Every text of every chart is at
#: least that (:func:`readable`; the layout tests check it).
MIN_POINTS = 10.8
FONT = {"value": MIN_POINTS, "tick": MIN_POINTS, "legend": MIN_POINTS, "label": 11.5, "title": 12.0}

SETS: dict[str, Mapping | tuple] = {"family": FAMILY_COLOURS, "path": PATH_COLOURS, "series": SERIES_COLOURS,
                                    "roof": ROOF_COLOURS, "point": POINT_COLOURS, "role": ROLE,
                                    "category": CATEGORY_COLOURS, "range": RANGE_COLOURS}


def _values(s) -> list[str]:
    return [v.lower() for v in (s.values() if isinstance(s, Mapping) else s)]


def meanings() -> dict[str, str]:
    """Colour (lower-case hex) -> its one meaning, ``"kind:name"`` (e.g. ``"family:mmad (Cube)"``,
    ``"series:1"``)."""
    out: dict[str, str] = {}
    for kind, s in SETS.items():
        items = s.items() if isinstance(s, Mapping) else enumerate(s)
        for name, colour in items:
            out.setdefault(colour.lower(), f"{kind}:{name}")
    return out


def check_disjoint() -> list[str]:
    """Colours given two meanings (empty when every colour has one): within a set, across sets, or neutral."""
    seen: dict[str, str] = {c: "neutral" for c in NEUTRAL}
    clashes = []
    for kind, s in SETS.items():
        items = s.items() if isinstance(s, Mapping) else enumerate(s)
        for name, colour in items:
            c = colour.lower()
            if c in seen:
                clashes.append(f"{c} is {seen[c]} and {kind}:{name}")
            seen[c] = f"{kind}:{name}"
    return clashes


def lab(colour: str) -> tuple[float, float, float]:
    """A colour in CIE L*a*b* (D65): distances there follow how different two colours look."""
    from matplotlib.colors import to_rgb

    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in to_rgb(colour)]
    m = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    xyz = [sum(a * b for a, b in zip(row, lin)) / w for row, w in zip(m, (0.95047, 1.0, 1.08883))]
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def difference(a: str, b: str) -> float:
    """How different two colours look (CIE76 delta E: about 2.3 is just noticeable, 20+ is another colour)."""
    return sum((x - y) ** 2 for x, y in zip(lab(a), lab(b))) ** 0.5


#: The smallest :func:`difference` between a series colour and any family or path colour.
MIN_DIFFERENCE = 25.0


def check_distinct(min_difference: float = MIN_DIFFERENCE) -> list[str]:
    """Series colours (after the grey reference) that look like a family's or a path's colour: they are drawn
    in the same explorers, so a learner would read one as the other. Empty when none does."""
    others = {**{f"family:{k}": v for k, v in FAMILY_COLOURS.items()}, **{f"path:{k}": v for k, v in PATH_COLOURS.items()}}
    found = []
    for i, c in enumerate(SERIES_COLOURS[1:], 1):
        name, near = min(others.items(), key=lambda kv: difference(c, kv[1]))
        if difference(c, near) < min_difference:
            found.append(f"series:{i} {c} looks like {name} {near} (delta E {difference(c, near):.0f})")
    return found


def series(i: int) -> str:
    """The colour of the ``i``-th run side by side (0: the reference)."""
    return SERIES_COLOURS[i % len(SERIES_COLOURS)]


def point(i: int) -> str:
    """The colour of the ``i``-th kernel on a roofline."""
    return POINT_COLOURS[i % len(POINT_COLOURS)]


def path(name: str) -> str:
    """The colour of a data path (an unknown one: a neutral grey)."""
    return PATH_COLOURS.get(name, "#b0b0b0")


def pyplot_cycle() -> list[str]:
    """The colours a notebook's own matplotlib chart gets in turn (``C0``, ``C1``... and every line or bar
    without a colour): the series colours, the reference grey last, so no own chart draws in a family's
    colour."""
    return [*SERIES_COLOURS[1:], SERIES_COLOURS[0]]


def use_palette() -> None:
    """Make the course's palette matplotlib's default colour cycle (``rcParams["axes.prop_cycle"]``): the
    labs' first cells call it (``views.use_palette()``), so a chart a lab draws itself, ``C0`` included, takes
    its colours from :data:`SERIES_COLOURS` and not matplotlib's tab10, whose colours are the families'."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams["axes.prop_cycle"] = cycler(color=pyplot_cycle())


def readable(fig: Any, points: float | None = None) -> Any:
    """Raise every text of ``fig`` smaller than ``points`` (default :data:`MIN_POINTS`) to that size: titles,
    labels, legends, annotations, and the tick labels (also those made when the figure is drawn). Charts
    call it last, so no chart of the course shows text under 9 CSS pt at 100 % zoom."""
    from matplotlib.text import Text

    size = MIN_POINTS if points is None else points
    for ax in fig.axes:
        ax.tick_params(labelsize=max(size, ax.xaxis.get_ticklabels()[0].get_fontsize()
                                     if ax.xaxis.get_ticklabels() else size))
    for t in fig.findobj(Text):
        if t.get_fontsize() < size:
            t.set_fontsize(size)
    return fig
