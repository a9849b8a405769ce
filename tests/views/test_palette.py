"""One meaning per colour: the palette's sets are disjoint, and every chart the labs draw takes its colours
from it: an operation family's colour is on that family's bars only, and within a figure two different
labels never share a colour."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_hex

from npusim import chartstyle
from npusim.views import charts
from npusim.views.style import family

pytestmark = pytest.mark.views


def coloured(fig) -> list[tuple[str, str]]:
    """(colour, meaning) of every artist of ``fig`` that means something: bars, lines, spans and points
    with a gid or a legend label (grids, frames and texts excluded). Meaning: the label, else the gid."""
    out = []
    for ax in fig.axes:
        for a in [*ax.patches, *ax.lines, *ax.collections]:
            gid, label = a.get_gid() or "", a.get_label() or ""
            meaning = label if label and not label.startswith("_") else gid
            if not meaning:
                continue
            if hasattr(a, "get_facecolor") and not hasattr(a, "get_xdata"):
                fc = a.get_facecolor()
                colours = [fc] if np.ndim(fc) == 1 else list(fc)
            else:
                colours = [a.get_color()]
            for c in colours:
                if np.ndim(c) and len(c) == 4 and c[3] == 0:
                    continue   # transparent
                out.append((to_hex(c, keep_alpha=False), meaning))
    return out


def lab08_figures() -> dict:
    """Lab 08's charts (``npusim.torch.charts``), on a two-step training run; none without torch."""
    try:
        import torch
    except ImportError:
        return {}
    import npusim.torch as nt
    from npusim.torch import charts as tc
    from npusim.torch import training

    x, y = training.shapes_dataset(16, size=8)
    model = nt.swap_modules(training.tiny_cnn())
    run = training.train(model, x, y, steps=2, batch=8)
    meter = nt.SavedTensorMeter(model)
    with meter:
        torch.nn.functional.cross_entropy(model(x[:8]), y[:8]).backward()
    report = training.fp16_gradient_report(training.tiny_cnn(), x[:8], y[:8], scales=(1.0, 1024.0))
    return {"torch three layers": tc.three_layers(), "torch transposed conv": tc.transposed_conv(),
            "torch loss": tc.loss_curves([run]), "torch step": tc.step_breakdown(run.last_step),
            "torch saved": tc.saved_tensors(meter), "torch gradients": tc.gradient_histogram(report)}


def lab_figures():
    """The chart types the labs draw, on the reference kernels: what labs 00-09 show (the package's charts;
    the labs' own, drawn in their cells, are checked below)."""
    from npusim import conv
    from npusim import model as nm
    from npusim.conv.fusion import compare_fusion
    from npusim.kernels.matmul import MatmulTiling, run_matmul
    from npusim.kernels.vector_add import run_vector_add

    rng = np.random.default_rng(0)
    x, y = rng.random(1 << 14).astype(np.float16), rng.random(1 << 14).astype(np.float16)
    add, add2 = run_vector_add(x, y, tile=1024).profile, run_vector_add(x, y, tile=4096).profile
    a = rng.standard_normal((128, 128)).astype(np.float16)
    mm = run_matmul(a, a, tiling=MatmulTiling(64, 64, 64, 2)).profile
    xc = rng.standard_normal((1, 16, 14, 14)).astype(np.float16)
    wc = rng.standard_normal((32, 16, 3, 3)).astype(np.float16)
    cv = conv.conv2d(xc, wc, None, 1, 1).profile
    fusion = compare_fusion(xc, wc, padding=1)
    graph = nm.small_cnn()
    run = nm.run_model(graph, nm.images(2), label="as captured")
    return {
        **lab08_figures(),
        "timeline add": charts.timeline(add, baseline=add2), "timeline conv": charts.timeline(cv),
        "utilization": charts.utilization(mm, baseline=mm), "bandwidth": charts.bandwidth(add, baseline=add2),
        "roofline": charts.roofline([add, mm, cv], baseline=add2), "occupancy": charts.occupancy(mm),
        "compare": charts.compare([add, add2, mm]), "fusion": fusion.chart(),
        "model timeline": nm.charts.timeline(run), "model breakdown": nm.charts.breakdown([run, run], ["a", "b"]),
        "model ops": nm.charts.op_utilization(run), "placement": nm.charts.placement(graph),
    }


@pytest.fixture(scope="module")
def figures():
    return lab_figures()


def test_the_palettes_sets_are_disjoint():
    assert chartstyle.check_disjoint() == []


def test_series_colours_do_not_look_like_a_family_or_a_path():
    assert chartstyle.check_distinct() == []
    # the measure itself: the old series blue, 10 delta E from data_copy's, is caught
    assert chartstyle.difference("#2166ac", chartstyle.FAMILY_COLOURS["data_copy (GM, L1, UB)"]) < 15
    assert chartstyle.difference("#000000", "#ffffff") > 99


def test_every_meaningful_colour_is_the_palettes(figures):
    known = set(chartstyle.meanings()) | {c.lower() for c in chartstyle.NEUTRAL}
    strays = {(name, c, m) for name, fig in figures.items() for c, m in coloured(fig) if c not in known}
    assert not strays, f"colours not in npusim.chartstyle: {sorted(strays)}"


def test_family_colours_only_on_their_family(figures):
    meanings = chartstyle.meanings()
    for name, fig in figures.items():
        for c, m in coloured(fig):
            kind = meanings.get(c, "neutral").split(":")[0]
            if m == "family_swatches":
                continue   # the family legend itself (its swatches: every family once)
            if m.startswith(("bars|", "bins|")):
                assert meanings[c] == f"family:{family(m.split('|')[-1]).label}", (name, m, c)
            elif kind == "family":
                pytest.fail(f"{name}: {m!r} is drawn in {c}, the colour of {meanings[c]}")


def test_within_a_figure_one_colour_has_one_label(figures):
    for name, fig in figures.items():
        seen: dict[str, str] = {}
        for c, m in coloured(fig):
            if c in chartstyle.NEUTRAL or m == "family_swatches" or m.startswith(("bars|", "bins|")) or "|" in m:
                continue   # gids of one series (e.g. "gm_bytes|0|GM->UB") and family bars: checked above
            m = re.sub(r"[\d.,]+", "#", m)   # "reserved 32.0 KB" and "reserved 16.0 KB" mean one thing
            assert seen.setdefault(c, m) == m, f"{name}: {c} is both {seen[c]!r} and {m!r}"


# --- the charts the labs draw themselves (matplotlib in a cell) -------------------------------------------

_DRAWS = re.compile(r"\b(?:ax\w*|plt)\.(plot|bar|barh|hist|step|loglog|semilogx|semilogy|scatter|axvspan|axhspan|fill_between)\(")
# a colour given as a string: after a colour keyword, or in a list given to one
_COLOUR_ARG = re.compile(r"\b(?:color|colors|colour|fc|ec|facecolor|edgecolor)\s*=\s*(\[[^\]]*\]|\"[^\"]*\"|'[^']*')")
_STRING = re.compile(r"\"([^\"]*)\"|'([^']*)'")
# a plot call's format string with a colour letter ("rx", "k:", "bo-")
_FORMAT = re.compile(r"\.(?:plot|loglog|semilogx|semilogy)\([^\"'\n]*[\"']([bgrcmykw])([-.:ox*+^sv]|--)*[\"']")


def _allowed(colour: str) -> bool:
    """A colour a lab may write: the cycle's ``C0``... (the palette, after ``views.use_palette()``), a palette
    colour other than a family's (those mean an operation family, drawn by the package's timeline), a neutral
    grey, black (the baseline's) or white."""
    from matplotlib.colors import is_color_like

    if re.fullmatch(r"C\d", colour) or not is_color_like(colour):
        return True    # not a colour at all (a format or a label in the list)
    known = {c for c, m in chartstyle.meanings().items() if not m.startswith("family:")}
    return to_hex(colour) in known | {c.lower() for c in chartstyle.NEUTRAL} | {"#000000"}


def _solutions():
    import nbformat

    from npusim.course.notebooks import find_root

    root = find_root()
    return [(p.name, nbformat.read(p, as_version=4)) for p in sorted((root / "solutions").glob("*.ipynb"))]


@pytest.mark.parametrize("name,nb", _solutions(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_labs_own_charts_take_the_palettes_colours(name, nb):
    """Every colour a lab's cells write is the palette's (a literal ``#1f77b4``, ``"red"`` or ``"rx"`` would be
    matplotlib's tab10, i.e. a family's colour), and a lab that draws its own charts calls
    ``views.use_palette()`` in its first cell, so the colours it leaves to matplotlib are the palette's too."""
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    strays = []
    for src in code:
        for arg in _COLOUR_ARG.findall(src):
            strays += [s for m in _STRING.findall(arg) for s in m if s and not _allowed(s)]
        strays += [f"format {m}" for m in _FORMAT.findall(src) if m[0] not in "kw"]
    assert not strays, f"{name}: colours not from npusim.chartstyle: {strays}"
    if any(_DRAWS.search(src) for src in code):
        assert "views.use_palette()" in code[0], f"{name} draws its own charts: its first cell calls views.use_palette()"


def test_the_notebook_check_sees_a_stray_colour():
    assert not _allowed("#1f77b4") and not _allowed("red") and not _allowed("gray")
    assert _allowed("C3") and _allowed("#999999") and _allowed("k") and _allowed(chartstyle.series(2))
    assert _FORMAT.findall('ax.plot(x, y, "rx", label="skipped")') and not _FORMAT.findall('ax.plot(x, y, "o-")')


def test_use_palette_sets_matplotlibs_cycle():
    import matplotlib as mpl

    saved = mpl.rcParams["axes.prop_cycle"]
    try:
        chartstyle.use_palette()
        cycle = [c.lower() for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]]
        assert cycle == [c.lower() for c in chartstyle.pyplot_cycle()]
        assert not set(cycle) & {c.lower() for c in chartstyle.FAMILY_COLOURS.values()}
    finally:
        mpl.rcParams["axes.prop_cycle"] = saved
