"""What every chart shares: figure size and resolution, labels, and colours defined once.

Colours mean the same thing in every chart of every lab (all of them are in :mod:`.palette`, one meaning
per colour): an operation family (``data_copy``, ``mmad``,
``fixpipe``, vector arithmetic, ...) has one colour wherever it is drawn, whatever else the kernel runs, so
switching a kernel variant never recolours a bar, and the timeline's legend lists every family in one order
(families a launch did not use are greyed out) so it never moves. Role colours (achieved vs peak, the
pinned baseline, the critical pipe) are fixed the same way.

Figures are built with :class:`matplotlib.figure.Figure` directly, never through pyplot, so nothing is
registered with pyplot and nothing leaks: a notebook shows a returned Figure through its ``_repr_png_``
(inline; :func:`register_notebook_display`), and a script saves it with ``fig.savefig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from matplotlib.figure import Figure

from ..errors import UsageError
from ..pipes import PIPE_ORDER, Pipe
from ..profile import Profile
from .. import chartstyle as _palette
from ..chartstyle import FAMILY_COLOURS, FONT, MIN_POINTS, readable, use_palette  # noqa: F401

#: Resolution figures are made for. Modest on purpose: the explorer redraws them on every slider move.
DPI = _palette.DPI

PIPE_LABELS = {Pipe.MTE2: "MTE2", Pipe.MTE1: "MTE1", Pipe.M: "M (Cube)", Pipe.V: "V (Vector)",
               Pipe.FIX: "FIX", Pipe.MTE3: "MTE3", Pipe.S: "S (Scalar)"}
_BY_MSPROF = {p.msprof_name: p for p in PIPE_ORDER}


# --- operation families ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """Operations drawn in one colour: ``ops`` are exact op names, ``prefixes`` op-name prefixes."""

    label: str
    colour: str
    ops: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()


#: Every operation family, in the order data flows through the core (the timeline legend's order).
FAMILIES: tuple[Family, ...] = (
    Family("data_copy (GM, L1, UB)", FAMILY_COLOURS["data_copy (GM, L1, UB)"], ("data_copy",), ("data_copy(",)),
    Family("data_copy_pad", FAMILY_COLOURS["data_copy_pad"], ("data_copy_pad",)),
    Family("load_data (L1 -> L0)", FAMILY_COLOURS["load_data (L1 -> L0)"], prefixes=("load_data",)),
    Family("mmad (Cube)", FAMILY_COLOURS["mmad (Cube)"], prefixes=("mmad",)),
    Family("fixpipe", FAMILY_COLOURS["fixpipe"], prefixes=("fixpipe",)),
    Family("vector arithmetic", FAMILY_COLOURS["vector arithmetic"], ("add", "sub", "mul", "div", "max", "min", "adds", "muls", "maxs",
                                            "mins", "abs", "relu", "duplicate")),
    Family("vector exp/ln/sqrt/1/x", FAMILY_COLOURS["vector exp/ln/sqrt/1/x"], ("exp", "ln", "sqrt", "reciprocal")),
    Family("reduce_max / reduce_sum", FAMILY_COLOURS["reduce_max / reduce_sum"], prefixes=("reduce_",)),
    Family("cast / compare / select", FAMILY_COLOURS["cast / compare / select"], ("cast", "compare", "select")),
    Family("scalar issue", FAMILY_COLOURS["scalar issue"], ("ISSUE",)),
    Family("get_value / set_value", FAMILY_COLOURS["get_value / set_value"], ("get_value", "set_value")),
)
#: Operations of no family above.
OTHER = Family("other", FAMILY_COLOURS["other"])
_FAMILY_OF: dict[str, Family] = {}


def family(op: str) -> Family:
    """The family of an operation name (``"fixpipe+relu"`` -> fixpipe, ``"exp"`` -> vector exp...)."""
    hit = _FAMILY_OF.get(op)
    if hit is None:
        hit = next((f for f in FAMILIES if op in f.ops or op.startswith(f.prefixes)), OTHER)
        _FAMILY_OF[op] = hit
    return hit


def op_colour(op: str) -> str:
    """The colour of an operation: its family's, in every chart."""
    return family(op).colour


def family_legend(ax, used: set[Family], title: str = "operation") -> list:
    """The fixed legend of operation families beside ``ax`` (right of its top): every family of
    :data:`FAMILIES` in order (and "other" when used); families not in ``used`` are faded, so the legend never
    changes shape. Drawn as one collection of swatches and plain texts (``gid="family"``), not a matplotlib
    Legend: a Legend of eleven entries costs a timeline half its build time on every redraw."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba
    from matplotlib.transforms import Affine2D, ScaledTranslation

    fams = list(FAMILIES) + ([OTHER] if OTHER in used else [])
    step, left, box = 14.0, 8.0, 9.0  # points: line height (MIN_POINTS text), gap to the axes, swatch size
    at_corner = Affine2D().scale(1 / 72) + ax.figure.dpi_scale_trans + ScaledTranslation(1, 1, ax.transAxes)
    tops = [-step * (i + 1.6) for i in range(len(fams))]
    swatches = [[(left, y - box / 2), (left + box, y - box / 2), (left + box, y + box / 2), (left, y + box / 2)]
                for y in tops]
    ax.add_collection(PolyCollection(swatches, transform=at_corner, clip_on=False, gid="family_swatches",
                                     facecolors=[to_rgba(f.colour, 1.0 if f in used else 0.18) for f in fams],
                                     edgecolors="none"), autolim=False)
    texts = [ax.annotate(title, (1, 1), xycoords="axes fraction", xytext=(left, -step * 0.5),
                         textcoords="offset points", fontsize="small", va="center", ha="left", annotation_clip=False,
                         gid="family_title")]
    for f, y in zip(fams, tops):
        texts.append(ax.annotate(f.label, (1, 1), xycoords="axes fraction", xytext=(left + box + 4, y),
                                 textcoords="offset points", fontsize="x-small", va="center", ha="left",
                                 alpha=1.0 if f in used else 0.4, annotation_clip=False, gid="family"))
    return texts


def legend_entries(ax) -> list[tuple[str, bool]]:
    """The family legend of ``ax`` as (label, used) pairs, in order (see :func:`family_legend`)."""
    return [(t.get_text(), (t.get_alpha() or 1.0) == 1.0) for t in ax.texts if t.get_gid() == "family"]


# --- roles -----------------------------------------------------------------------------------------

#: Roles, roofs, points and series: defined once in :mod:`.palette` (one meaning per colour).
ROLE = _palette.ROLE
ROOF_COLOURS = _palette.ROOF_COLOURS
POINT_COLOURS = _palette.POINT_COLOURS
SERIES_COLOURS = _palette.SERIES_COLOURS


# --- helpers ---------------------------------------------------------------------------------------

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


def figure(width: float, height: float) -> Figure:
    """A Figure unknown to pyplot (no registration, nothing to close, no leak) at :data:`DPI`."""
    return Figure(figsize=(width, height), dpi=DPI)


def names(profiles: Sequence[Profile], labels: Sequence[str] | None) -> list[str]:
    """Labels of profiles: given, or the kernel names (numbered when one kernel appears twice)."""
    if labels is None:
        labels = [p.kernel for p in profiles]
        if len(set(labels)) < len(labels):
            labels = [f"{name} #{i + 1}" for i, name in enumerate(labels)]
    elif len(labels) != len(profiles):
        raise UsageError(f"got {len(labels)} label(s) for {len(profiles)} profile(s)")
    return [str(x) for x in labels]


def category_labels(ax, axis: str, positions: Sequence[float], labels: Sequence[str], pad: float = 4.0,
                    **text_kw) -> list:
    """Label the categories along ``axis`` ("x" or "y") of ``ax`` (pipes, data paths, lanes) with plain
    texts instead of tick labels, and clear that axis's ticks. Why: a tick builds five artists with all
    their properties on every redraw (about 3 ms each on a 2-core machine, a third of a timeline's
    budget); a text is one cached raster. The texts carry ``gid="category|x"`` (or ``"|y"``), in order;
    :func:`category_texts` reads them back."""
    if axis == "x":
        ax.set_xticks([])
        kw = dict(xycoords=("data", "axes fraction"), xytext=(0, -pad), ha="center", va="top")
        points = [(p, 0.0) for p in positions]
    else:
        ax.set_yticks([])
        kw = dict(xycoords=("axes fraction", "data"), xytext=(-pad, 0), ha="right", va="center")
        points = [(0.0, p) for p in positions]
    kw.update(text_kw)
    return [ax.annotate(label, xy, textcoords="offset points", annotation_clip=False, gid=f"category|{axis}", **kw)
            for xy, label in zip(points, labels)]


def category_texts(ax, axis: str) -> list[str]:
    """The category labels :func:`category_labels` wrote along ``axis`` of ``ax``, in order."""
    return [t.get_text() for t in ax.texts if t.get_gid() == f"category|{axis}"]


def value_labels(bars, labels: Sequence[str], clear_of: Sequence[float] | None = None, fontsize: Any = None) -> None:
    """Each bar's value written above it (``ax.bar_label``'s place), or above ``clear_of[i]`` when that is
    higher: a pinned baseline's tick at the same x is not written over."""
    ax = bars[0].axes if len(bars) else None
    if ax is None:
        return
    for i, (bar, text) in enumerate(zip(bars, labels)):
        if not text:
            continue
        y = bar.get_y() + bar.get_height()
        if clear_of is not None and i < len(clear_of):
            y = max(y, clear_of[i])
        lift = 3.0 if clear_of is None else 4.5   # a baseline's tick is 2 pt thick: clear it by a little more
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, y), xytext=(0, lift), textcoords="offset points",
                    ha="center", va="bottom", fontsize=fontsize if fontsize is not None else FONT["value"],
                    gid="value_label")


def legend_above(ax, ncols: int = 2, **kw) -> Any:
    """The axes' legend in one band above the plotting area, where it cannot cover data."""
    kw.setdefault("fontsize", "small")
    return ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=ncols, frameon=False,
                     borderaxespad=0.2, **kw)


def legend_right(ax, **kw) -> Any:
    """The axes' legend beside the plotting area, on the right."""
    kw.setdefault("fontsize", "small")
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0, **kw)


def register_notebook_display() -> None:
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

