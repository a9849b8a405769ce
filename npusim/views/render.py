"""Figure -> PNG bytes, fast enough for an explorer's redraw.

An explorer redraws the same tick labels, axis labels and legend entries on every slider move, and with
matplotlib >= 3.10 text is most of the rendering time: Agg lays out and rasterises every glyph of every
string on every draw (about 3 ms for a 27-character label on a shared 2-core machine; 25 labels are a
timeline's whole budget). :func:`png_bytes` renders with a renderer that keeps each string's raster
(FreeType's whole-string bitmap, as matplotlib drew text before 3.10) and its metrics, keyed by the string,
the font file, size, dpi and angle, so a label drawn before costs one image blit. Strings the cache cannot
serve (mathtext, TeX) go through matplotlib's own code. The pixels differ from matplotlib's glyph-by-glyph
rendering only by sub-pixel glyph placement (``tests/views/test_views_render.py`` bounds the difference).

PNG encoding uses zlib level 1: at this size it is several times faster than the default and the files
stay small.
"""

from __future__ import annotations

import io
import math
from collections import OrderedDict

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.figure import Figure
from matplotlib.font_manager import fontManager as _fontManager, get_font

#: Strings kept (each a small uint8 bitmap): enough for every label of several labs' charts.
TEXT_CACHE_SIZE = 4096
#: zlib effort of the PNG encoder (1 = fastest).
PNG_COMPRESS_LEVEL = 1

_rasters: OrderedDict = OrderedDict()
_metrics: OrderedDict = OrderedDict()
_heights: dict = {}
stats = {"hits": 0, "misses": 0}


_font_files: dict = {}


def _font_files_of(prop) -> tuple:
    # findfont rebuilds a tuple of rcParams on every call (about 0.2 ms); a FontProperties hashes its values
    key = hash(prop)
    files = _font_files.get(key)
    if files is None:
        files = _font_files[key] = tuple(_fontManager._find_fonts_by_props(prop))
    return files


def _font_key(prop, dpi: float) -> tuple:
    return (_font_files_of(prop), prop.get_size_in_points(), dpi)


def _remember(cache: OrderedDict, key, value):
    cache[key] = value
    if len(cache) > TEXT_CACHE_SIZE:
        cache.popitem(last=False)
    return value


class CachedTextRenderer(RendererAgg):
    """An Agg renderer whose plain-text strings are rasterised once per (string, font, size, dpi)."""

    def _raster(self, s: str, prop, antialiased: bool) -> tuple[np.ndarray, float, float, float]:
        key = (s, _font_key(prop, self.dpi), antialiased, get_hinting_flag())
        hit = _rasters.get(key)
        if hit is not None:
            _rasters.move_to_end(key)
            stats["hits"] += 1
            return hit
        stats["misses"] += 1
        font = get_font(list(_font_files_of(prop)))
        font.clear()
        font.set_size(prop.get_size_in_points(), self.dpi)
        font.set_text(s, 0.0, flags=get_hinting_flag())
        font.draw_glyphs_to_bitmap(antialiased=antialiased)
        xo, yo = font.get_bitmap_offset()
        image = np.array(font.get_image(), dtype=np.uint8)  # a copy: the font's buffer is reused
        return _remember(_rasters, key, (image, xo / 64.0, yo / 64.0, font.get_descent() / 64.0))

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        # docstring inherited; mathtext and text with font features keep matplotlib's own path
        if ismath or (mtext is not None and (mtext.get_fontfeatures() or mtext.get_language())):
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        image, xo, yo, d = self._raster(s, prop, gc.get_antialiased())
        if image.size == 0:
            return None
        # placement as matplotlib 3.9 drew whole-string bitmaps: y is downwards, at the bitmap's bottom
        x = round(x + xo + d * math.sin(math.radians(angle)))
        y = round(y + yo + d * math.cos(math.radians(angle)))
        self._renderer.draw_text_image(image, x, y + 1, angle, gc)
        return None

    def get_text_width_height_descent(self, s, prop, ismath):
        # docstring inherited; matplotlib caches this per renderer, and every redraw has a new one
        if ismath:
            return super().get_text_width_height_descent(s, prop, ismath)
        key = (s, _font_key(prop, self.dpi), get_hinting_flag())
        hit = _metrics.get(key)
        if hit is None:
            hit = _remember(_metrics, key, super().get_text_width_height_descent(s, prop, ismath))
        return hit


    def _get_font_height_metrics(self, prop):
        # Text._get_layout asks a renderer for these first (else it opens the font's tables for every text)
        key = _font_key(prop, self.dpi)
        hit = _heights.get(key)
        if hit is None:
            font = get_font(list(_font_files_of(prop)))
            hit = (None, None, None)
            for table_name, gap, ascent, descent in (("OS/2", "sTypoLineGap", "sTypoAscender", "sTypoDescender"),
                                                     ("hhea", "lineGap", "ascent", "descent")):
                table = font.get_sfnt_table(table_name)
                if table is not None:
                    scale = prop.get_size_in_points() * self.dpi / 72 / font.get_sfnt_table("head")["unitsPerEm"]
                    hit = (table[ascent] * scale, -table[descent] * scale, table[gap] * scale)
                    break
            _heights[key] = hit
        return hit


class _Canvas(FigureCanvasAgg):
    def get_renderer(self):
        w, h = self.figure.bbox.size
        key = (w, h, self.figure.dpi)
        if getattr(self, "_lastKey", None) != key:
            self.renderer = CachedTextRenderer(w, h, self.figure.dpi)
            self._lastKey = key
        return self.renderer


def png_bytes(fig: Figure, dpi: float | None = None) -> bytes:
    """The figure as PNG (its own size; at ``dpi`` if given), drawn with the cached-text renderer."""
    from PIL import Image

    old = fig.dpi
    if dpi is not None:
        fig.dpi = dpi
    try:
        canvas = _Canvas(fig)
        canvas.draw()
        rgba = canvas.buffer_rgba()
        image = Image.frombuffer("RGBA", (rgba.shape[1], rgba.shape[0]), rgba, "raw", "RGBA", 0, 1)
        buf = io.BytesIO()
        image.save(buf, format="png", compress_level=PNG_COMPRESS_LEVEL)
        return buf.getvalue()
    finally:
        if dpi is not None:
            fig.dpi = old
