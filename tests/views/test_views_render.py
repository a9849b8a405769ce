"""The explorer's PNG renderer draws what matplotlib draws, with each string rasterised once."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from npusim.views import charts, render

pytestmark = pytest.mark.views


def _grey(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)


@pytest.mark.parametrize("chart", ["timeline", "utilization", "bandwidth", "roofline", "occupancy"])
def test_cached_text_rendering_matches_matplotlib(chart, mm):
    fig = charts.CHARTS[chart](mm)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    ours, theirs = _grey(render.png_bytes(fig)), _grey(buf.getvalue())
    assert ours.shape == theirs.shape
    diff = np.abs(ours - theirs)
    # text lands within a sub-pixel of matplotlib's own placement: a thin fringe of glyph edges differs
    assert diff.mean() < 4.0 and (diff > 64).mean() < 0.03, (diff.mean(), (diff > 64).mean())


def test_strings_are_rasterised_once(vadd, vadd_fast):
    render._rasters.clear()
    render.png_bytes(charts.timeline(vadd))
    before = dict(render.stats)
    render.png_bytes(charts.timeline(vadd_fast))  # same labels, ticks and legend; other numbers
    hits, misses = render.stats["hits"] - before["hits"], render.stats["misses"] - before["misses"]
    assert hits > 3 * misses > 0


def test_mathtext_and_dpi():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1), dpi=80)
    fig.text(0.1, 0.5, r"$\sqrt{K}$ and plain")
    png = render.png_bytes(fig, dpi=40)
    assert _grey(png).shape == (40, 80) and fig.dpi == 80
    assert _grey(png).min() < 128  # something was drawn
