"""Is a figure readable? Text inside the figure, legends off the data, labels not on top of one another.

:func:`layout_problems` measures a drawn figure (matplotlib's artist extents in pixels) and says, in words,
what is wrong: a text that leaves the figure (the explorer shows figures uncropped, so it would be cut), a
legend over a bar, line, marker or label, a data label crossing the edge of its axes, two texts on top of
each other. The chart tests run it on every chart type; a notebook's own chart can run it too.

:func:`tidy` repairs a notebook's own chart the usual ways: a legend over data moves to a free corner of
its axes, or beside the axes when no corner is free; when a data label leaves its axes, the limits widen a
little and the label moves to a mirror position inside, clear of the other labels; then the axes shrink
together until every text is inside the figure.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

#: Pixels a text may stick out of the figure (antialiasing) or two extents may touch.
TOLERANCE = 1.0
_CORNERS = ("upper right", "upper left", "lower right", "lower left", "center right", "center left",
            "upper center", "lower center")


def _renderer(fig: Figure):
    """Draw the figure with a renderer that records which texts it drew (ticks outside the view and hidden
    labels exist as artists but are not drawn)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    drawn: dict[int, Text] = {}
    draw_text = renderer.draw_text

    def recording(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s.strip():
            drawn[id(mtext)] = mtext
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = recording
    try:
        canvas.draw()
    finally:
        del renderer.draw_text
    renderer.npusim_drawn_texts = list(drawn.values())
    return renderer


def _shown(t: Text) -> bool:
    return t.get_visible() and bool(t.get_text().strip()) and t.get_alpha() != 0


def texts(fig: Figure, renderer=None) -> list[Text]:
    """Every text drawn in the figure: titles, labels, tick labels, legend entries, annotations."""
    return list((renderer or _renderer(fig)).npusim_drawn_texts)


def _describe(t: Text) -> str:
    return repr(t.get_text().replace("\n", " ")[:60])


def _data_extents(ax: Axes, renderer, legend: Legend | None) -> Iterable[tuple[str, object, bool]]:
    """(what, geometry, clipped) of the axes' data: bars and patches (Bbox), lines and polygons (display
    paths), markers and texts (Bbox); ``clipped``: only its part inside the axes is drawn."""
    inside = {id(a) for a in legend.findobj()} if legend is not None else set()
    for p in ax.patches:
        if id(p) in inside or not p.get_visible():
            continue
        box = p.get_window_extent(renderer)
        if box.width < 0.5 or box.height < 0.5:
            continue
        what = f"patch {p.get_gid() or type(p).__name__}"
        if isinstance(p, Rectangle):
            yield what, box, p.get_clip_on()
        else:  # an outline (a step histogram) covers only its edge unless filled
            path = p.get_transform().transform_path(p.get_path())
            yield what, (path, p.get_fill()), p.get_clip_on()
    for line in ax.lines:
        if id(line) in inside or not line.get_visible() or len(line.get_xdata()) == 0:
            continue
        path = line.get_transform().transform_path(line.get_path())
        name = line.get_gid() or line.get_label()
        if line.get_linestyle() not in ("None", "", " "):
            yield f"line {name}", path, line.get_clip_on()
        if line.get_marker() not in (None, "None", "", " "):
            r = line.get_markersize() * renderer.points_to_pixels(1.0) / 2
            thin = max(1.0, line.get_markeredgewidth() * renderer.points_to_pixels(1.0) / 2)
            rx, ry = {"_": (r, thin), "|": (thin, r)}.get(line.get_marker(), (r, r))   # a tick is a line
            for x, y in path.vertices:
                yield f"marker of {name}", Bbox.from_extents(x - rx, y - ry, x + rx, y + ry), line.get_clip_on()
    for coll in ax.collections:
        if id(coll) in inside or not coll.get_visible():
            continue
        name = coll.get_gid() or type(coll).__name__
        offsets = coll.get_offsets()
        if len(offsets) > 1 or (len(offsets) == 1 and np.any(offsets[0])):  # markers (scatter)
            for x, y in coll.get_offset_transform().transform(offsets):
                yield f"marker of {name}", Bbox.from_extents(x - 3, y - 3, x + 3, y + 3), coll.get_clip_on()
            continue
        for path in coll.get_paths():
            yield name, coll.get_transform().transform_path(path), coll.get_clip_on()
    for t in ax.texts:
        if id(t) not in inside and _shown(t):
            yield f"text {_describe(t)}", t.get_window_extent(renderer), False


def _covers(ax: Axes, box: Bbox, renderer, legend: Legend) -> str | None:
    """What data of ``ax`` the box ``box`` covers (None: nothing)."""
    visible = Bbox.intersection(box, ax.bbox)
    for what, geom, clipped in _data_extents(ax, renderer, legend):
        target = visible if clipped else box
        if target is not None and _hits(geom, target):
            return what
    return None


def _hits(geometry, box: Bbox) -> bool:
    if isinstance(geometry, Bbox):
        return Bbox.intersection(geometry, box) is not None and \
            min(geometry.x1, box.x1) - max(geometry.x0, box.x0) > TOLERANCE and \
            min(geometry.y1, box.y1) - max(geometry.y0, box.y0) > TOLERANCE
    path, filled = geometry if isinstance(geometry, tuple) else (geometry, _closed(geometry))
    v = path.vertices
    if len(v) and np.any((v[:, 0] > box.x0) & (v[:, 0] < box.x1) & (v[:, 1] > box.y0) & (v[:, 1] < box.y1)):
        return True
    return path.intersects_bbox(box, filled=filled)


def _closed(path) -> bool:
    v = path.vertices
    return len(v) > 2 and bool(np.allclose(v[0], v[-1]))


def _legends(fig: Figure) -> list[tuple[Legend, list[Axes]]]:
    out = [(ax.get_legend(), [ax]) for ax in fig.axes if ax.get_legend() is not None]
    out += [(leg, list(fig.axes)) for leg in fig.legends]
    return [(leg, axes) for leg, axes in out if leg.get_visible()]


def legend_overlaps(fig: Figure, renderer=None) -> list[str]:
    """Data (bars, lines, markers, labels) that a legend covers, in words."""
    renderer = renderer or _renderer(fig)
    found = []
    for leg, axes in _legends(fig):
        box = leg.get_window_extent(renderer)
        first = _describe(leg.get_texts()[0]) if leg.get_texts() else "empty"
        for ax in axes:
            what = _covers(ax, box, renderer, leg)
            if what:
                found.append(f"the legend ({first}, ...) covers {what}")
    return found


def texts_outside(fig: Figure, renderer=None) -> list[str]:
    """Texts that leave the figure (an explorer shows figures uncropped: they would be cut)."""
    renderer = renderer or _renderer(fig)
    frame = fig.bbox
    found = []
    for t in texts(fig, renderer):
        box = t.get_window_extent(renderer)
        if (box.x0 < frame.x0 - TOLERANCE or box.x1 > frame.x1 + TOLERANCE or box.y0 < frame.y0 - TOLERANCE
                or box.y1 > frame.y1 + TOLERANCE):
            found.append(f"text {_describe(t)} leaves the figure ({box.x0:.0f}..{box.x1:.0f} x "
                         f"{box.y0:.0f}..{box.y1:.0f} px; the figure is {frame.width:.0f} x {frame.height:.0f})")
    return found


def labels_outside_axes(fig: Figure, renderer=None) -> list[str]:
    """Texts placed at a data point (annotations, bar labels, ``ax.text`` in data coordinates) that cross
    the edge of their axes: a label belongs to the plotting area its point is in."""
    renderer = renderer or _renderer(fig)
    drawn = {id(t) for t in texts(fig, renderer)}
    found = []
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            at_data = t.xycoords == "data" if isinstance(t, Annotation) else t.get_transform() == ax.transData
            if not at_data or id(t) not in drawn:
                continue
            box = t.get_window_extent(renderer)
            if (box.x0 < frame.x0 - TOLERANCE or box.x1 > frame.x1 + TOLERANCE or box.y0 < frame.y0 - TOLERANCE
                    or box.y1 > frame.y1 + TOLERANCE):
                found.append(f"label {_describe(t)} crosses the edge of its axes")
    return found


def overlapping_texts(fig: Figure, renderer=None) -> list[str]:
    """Pairs of texts drawn on top of each other."""
    renderer = renderer or _renderer(fig)
    items = [(t, _extent(t, renderer)) for t in texts(fig, renderer)]
    found = []
    for i, (a, ba) in enumerate(items):
        for b, bb in items[i + 1:]:
            if _hits(ba, bb):
                found.append(f"texts {_describe(a)} and {_describe(b)} overlap")
    return found


def _extent(t: Text, renderer) -> Bbox:
    """What a text covers: its box's patch when it has one (a numbered badge, a boxed name), else its glyphs."""
    patch = t.get_bbox_patch()
    if patch is not None and patch.get_visible():
        t.update_bbox_position_size(renderer)
        return patch.get_window_extent(renderer)
    return t.get_window_extent(renderer)


def labels_over_markers(fig: Figure, renderer=None) -> list[str]:
    """Labels written over a data point (a marker of a line or a scatter): the point or the label is hidden."""
    renderer = renderer or _renderer(fig)
    drawn = {id(t) for t in texts(fig, renderer)}
    found = []
    for ax in fig.axes:
        leg = ax.get_legend()
        inside = {id(a) for a in leg.findobj()} if leg is not None else set()
        markers = [(what, box) for what, box, _ in _data_extents(ax, renderer, leg) if what.startswith("marker")]
        for t in ax.texts:
            if id(t) not in drawn or id(t) in inside:
                continue
            box = _extent(t, renderer)
            for what, mbox in markers:
                if _hits(mbox, box):
                    found.append(f"label {_describe(t)} covers the {what}")
                    break
    return found


def layout_problems(fig: Figure) -> list[str]:
    """Everything :func:`texts_outside`, :func:`legend_overlaps`, :func:`labels_outside_axes`,
    :func:`overlapping_texts` and :func:`labels_over_markers` find."""
    renderer = _renderer(fig)
    return (texts_outside(fig, renderer) + legend_overlaps(fig, renderer) + labels_outside_axes(fig, renderer)
            + overlapping_texts(fig, renderer) + labels_over_markers(fig, renderer))


# --- repairs ---------------------------------------------------------------------------------------

def _place_legend(ax: Axes, renderer) -> None:
    leg = ax.get_legend()
    if leg is None:
        return
    if not legend_overlaps_axes(ax, leg, renderer):
        return
    for loc in _CORNERS:
        leg.set_loc(loc)
        leg.set_bbox_to_anchor(None)
        if not legend_overlaps_axes(ax, leg, renderer):
            return
    leg.set_loc("upper left")
    leg.set_bbox_to_anchor((1.01, 1.0), transform=ax.transAxes)


def legend_overlaps_axes(ax: Axes, leg: Legend, renderer) -> bool:
    """Whether ``leg`` covers any data of ``ax``."""
    return _covers(ax, leg.get_window_extent(renderer), renderer, leg) is not None


def _inside(box: Bbox, frame: Bbox) -> bool:
    return (box.x0 >= frame.x0 - TOLERANCE and box.x1 <= frame.x1 + TOLERANCE and box.y0 >= frame.y0 - TOLERANCE
            and box.y1 <= frame.y1 + TOLERANCE)


def _flip_annotations(ax: Axes, renderer) -> None:
    """Move each offset annotation that leaves its axes to the first mirror position (left/right, then
    above/below, then both) that is inside the axes and clear of the other labels."""
    frame = ax.get_window_extent(renderer)
    labels = [t for t in ax.texts if _shown(t)]
    for t in labels:
        if not isinstance(t, Annotation) or t.anncoords != "offset points":
            continue
        if _inside(t.get_window_extent(renderer), frame):
            continue
        (dx, dy), ha, va = t.xyann, t.get_horizontalalignment(), t.get_verticalalignment()
        flip_h = {"left": "right", "right": "left"}.get(ha, ha)
        flip_v = {"top": "bottom", "bottom": "top", "baseline": "top"}.get(va, va)
        fallback = None
        for xy, h, v in (((-dx, dy), flip_h, va), ((dx, -dy), ha, flip_v), ((-dx, -dy), flip_h, flip_v)):
            t.xyann = xy
            t.set_horizontalalignment(h)
            t.set_verticalalignment(v)
            box = t.get_window_extent(renderer)
            if not _inside(box, frame):
                continue
            fallback = fallback or (xy, h, v)
            if not any(_hits(box, o.get_window_extent(renderer)) for o in labels if o is not t):
                break
        else:
            (xy, h, v) = fallback or ((dx, dy), ha, va)
            t.xyann = xy
            t.set_horizontalalignment(h)
            t.set_verticalalignment(v)


def _make_room(ax: Axes, renderer, share: float = 0.08) -> None:
    """Widen the axes' limits by ``share`` on each side when a data label leaves them (linear axes)."""
    frame = ax.get_window_extent(renderer)
    if not any(isinstance(t, Annotation) and t.xycoords == "data" and _shown(t)
               and not _inside(t.get_window_extent(renderer), frame) for t in ax.texts):
        return
    for get, set_, scale in ((ax.get_xlim, ax.set_xlim, ax.get_xscale()), (ax.get_ylim, ax.set_ylim, ax.get_yscale())):
        if scale == "linear":
            lo, hi = get()
            set_(lo - share * (hi - lo), hi + share * (hi - lo))


def tidy(fig: Figure) -> Figure:
    """Repair a chart's layout in place (see the module docstring); returns the figure."""
    renderer = _renderer(fig)
    for ax in fig.axes:
        _make_room(ax, renderer)
    renderer = _renderer(fig)
    for ax in fig.axes:
        _flip_annotations(ax, renderer)
        _place_legend(ax, renderer)
    _fit(fig)
    return fig


def _fit(fig: Figure, pad: float = 0.04, rounds: int = 4) -> None:
    """Shrink and shift all axes together until every text is inside the figure (tight_layout refuses
    axes placed with add_axes)."""
    for _ in range(rounds):
        renderer = _renderer(fig)
        if not texts_outside(fig, renderer):
            return
        box = fig.get_tightbbox(renderer)  # inches
        w, h = fig.get_size_inches()
        lo, ro = max(0.0, -box.x0) + pad, max(0.0, box.x1 - w) + pad
        bo, to = max(0.0, -box.y0) + pad, max(0.0, box.y1 - h) + pad
        sx, sy = 1 - (lo + ro) / w, 1 - (bo + to) / h
        for ax in fig.axes:
            p = ax.get_position()
            ax.set_position((lo / w + p.x0 * sx, bo / h + p.y0 * sy, p.width * sx, p.height * sy))


__all__ = ["labels_outside_axes", "labels_over_markers", "layout_problems", "legend_overlaps", "overlapping_texts", "texts", "texts_outside",
           "tidy"]
