"""Lab 04's references, the host preparation its two kernel hooks share, and the explorer's tiling helper.

- :func:`conv2d_float64` is the exact Conv2D (float64) that the checks compare with;
- :func:`prepare` checks a learner's kernel class and the layer, and picks or checks the tiling;
- :func:`explore_tiling` makes a valid :class:`~npusim.conv.ConvTiling` from a few sizes (the explorer).
"""

from __future__ import annotations

import numpy as np

import npusim as ns

from ...conv import host
from ...conv.common import ceil_div, round_up
from ...conv.geometry import ConvGeometry
from ...conv.choose import choose_tiling
from ...conv.tiling import ConvTiling


def prepare(kernel_class, base: type, variant: str, x, w, bias, stride, padding, dilation, out_dtype,
            tiling: ConvTiling | None, config) -> tuple:
    """``(cfg, x, g, t, b)`` for a launch of ``kernel_class`` (a subclass of ``base``) on the layer, with
    ``tiling`` (checked, and of ``variant``) or ``choose_tiling``'s; ``b`` is the checked bias or None."""
    if not (isinstance(kernel_class, type) and issubclass(kernel_class, base)):
        raise ns.UsageError(f"this convolution needs a subclass of {base.__name__}, not {kernel_class!r}")
    cfg = ns.get_config(config)
    x = np.ascontiguousarray(np.asarray(x))
    w = np.asarray(w)
    g = ConvGeometry.of(x.shape, w.shape, stride, padding, dilation, x.dtype, out_dtype)
    t = tiling if tiling is not None else choose_tiling(g, cfg, variant)
    if t.variant != variant:
        raise ns.UsageError(f"a {base.__name__} convolution needs a '{variant}' tiling, not '{t.variant}'")
    t.check(g, cfg)
    return cfg, x, g, t, host.check_bias(bias, g)


def _pair(v):
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def conv2d_float64(x, w, bias=None, stride=1, padding=0, dilation=1) -> np.ndarray:
    """The exact Conv2D of the values ``x`` and ``w`` hold, in float64 (a sum over the taps)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    x = np.asarray(x).astype(np.float64)
    w = np.asarray(w).astype(np.float64)
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, cin, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((n, cout, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias).astype(np.float64)[None, :, None, None]
    return out


def explore_tiling(g: ConvGeometry, variant: str, rows: int, cols: int, cin_block: int, cout_block: int,
                   config=None) -> ConvTiling:
    """A tiling of ``variant`` with these sizes, the rest as :func:`~npusim.conv.choose_tiling` chose.

    Sizes beyond the layer are clipped (``rows`` to Ho, ``cols`` to Wo, the blocks to the channels);
    img2col always takes whole rows (``cols`` = Wo) and its Mmad tiles (``m_tile``, ``k_tile``) are
    shrunk until the buffers fit. The result is checked: a size that is invalid or does not fit raises
    the simulator's UsageError or CapacityError, which says why."""
    cfg = ns.get_config(config)
    base = choose_tiling(g, cfg, variant)
    rows = max(1, min(rows, g.ho))
    cols = g.wo if (variant == "img2col" or cols >= g.wo) else cols
    cin_block = g.cin if cin_block >= g.cin else cin_block
    cout_block = g.cout if cout_block >= g.cout else cout_block
    t = base.replace(rows=rows, cols=cols, cin_block=cin_block, cout_block=cout_block)
    if variant == "img2col":
        c0 = g.c0
        positions = rows * g.wo
        m_tile = min(base.m_tile, round_up(positions, 16))
        k_block = ceil_div(min(cin_block, g.cin), c0) * g.kk * c0
        k_tile = min(base.k_tile, k_block)
        t = t.replace(m_tile=m_tile, k_tile=k_tile)
        for _ in range(32):          # shrink the Mmad tiles until the buffers fit
            use = t.usage(g, cfg)
            if all(v <= cfg.memory_bytes(mem) for mem, v in use.items()):
                break
            if t.k_tile > c0:
                t = t.replace(k_tile=max(c0, t.k_tile // 2 // c0 * c0))
            elif t.m_tile > 16:
                t = t.replace(m_tile=max(16, t.m_tile // 2 // 16 * 16))
            else:
                break
    t.check(g, cfg)
    return t


__all__ = ["conv2d_float64", "prepare", "explore_tiling"]
