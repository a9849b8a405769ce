"""Host-side (numpy) conversions between the data formats of the Da Vinci core [S1, S3 数据排布格式].

- ND: plain row-major.
- NZ (FRACTAL_NZ) of an M x N matrix: shape (N1, M1, 16, C0): fractals ordered column-major, elements
  inside row-major. Used in L1 and L0C.
- ZZ of an M x K matrix: (M1, K1, 16, K0), the L0A layout. ZN of a K x N matrix: (K1, N1, 16, K0) with
  each fractal holding 16 columns of K0 rows, the L0B layout.
- NC1HWC0 (5HD): (N, C1, H, W, C0), channels split into C1 blocks of C0 = 32 B / element size.
- FRACTAL_Z weights: (C1 * Kh * Kw, N1, 16, C0), i.e. the ZN layout of the K x Cout matrix with
  K = (c1, kh, kw, c0).

All functions zero-pad to whole fractals and return new arrays.
"""

from __future__ import annotations

import numpy as np

from .dtypes import c0 as _c0


def _pad2(a: np.ndarray, r: int, c: int) -> np.ndarray:
    out = np.zeros((r, c), dtype=a.dtype)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def nd_to_nz(a: np.ndarray) -> np.ndarray:
    """M x N matrix -> NZ fractals (N1, M1, 16, C0)."""
    c0 = _c0(a.dtype)
    m, n = a.shape
    m1, n1 = -(-m // 16), -(-n // c0)
    return _pad2(a, m1 * 16, n1 * c0).reshape(m1, 16, n1, c0).transpose(2, 0, 1, 3).copy()


def nz_to_nd(nz: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """NZ fractals (N1, M1, 16, C0) -> the top-left rows x cols of the ND matrix."""
    n1, m1, m0, c0 = nz.shape
    return nz.transpose(1, 2, 0, 3).reshape(m1 * m0, n1 * c0)[:rows, :cols].copy()


def nd_to_zz(a: np.ndarray) -> np.ndarray:
    """M x K matrix -> ZZ fractals (M1, K1, 16, K0) (L0A)."""
    k0 = _c0(a.dtype)
    m, k = a.shape
    m1, k1 = -(-m // 16), -(-k // k0)
    return _pad2(a, m1 * 16, k1 * k0).reshape(m1, 16, k1, k0).transpose(0, 2, 1, 3).copy()


def nd_to_zn(b: np.ndarray) -> np.ndarray:
    """K x N matrix -> ZN fractals (K1, N1, 16, K0) (L0B): fractal (k1, n1) holds B[k1*K0:+K0, n1*16:+16]
    transposed (16 rows of n, K0 columns of k)."""
    k0 = _c0(b.dtype)
    k, n = b.shape
    k1, n1 = -(-k // k0), -(-n // 16)
    return _pad2(b, k1 * k0, n1 * 16).reshape(k1, k0, n1, 16).transpose(0, 2, 3, 1).copy()


def nchw_to_nc1hwc0(x: np.ndarray, c0: int | None = None) -> np.ndarray:
    """(N, C, H, W) -> (N, C1, H, W, C0), zero-padding C up to C1 * C0."""
    c0 = c0 or _c0(x.dtype)
    n, c, h, w = x.shape
    c1 = -(-c // c0)
    out = np.zeros((n, c1 * c0, h, w), dtype=x.dtype)
    out[:, :c] = x
    return out.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2).copy()


def nc1hwc0_to_nchw(y: np.ndarray, channels: int) -> np.ndarray:
    """(N, C1, H, W, C0) -> (N, channels, H, W)."""
    n, c1, h, w, c0 = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :channels].copy()


def weights_to_fractal_z(w: np.ndarray, c0: int | None = None) -> np.ndarray:
    """Conv weights (Cout, Cin, Kh, Kw) -> FRACTAL_Z (C1 * Kh * Kw, N1, 16, C0)."""
    c0 = c0 or _c0(w.dtype)
    cout, cin, kh, kw = w.shape
    c1 = -(-cin // c0)
    n1 = -(-cout // 16)
    full = np.zeros((n1 * 16, c1 * c0, kh, kw), dtype=w.dtype)
    full[:cout, :cin] = w
    # K index = ((c1 * kh + i) * kw + j) * C0 + c0 ; N index = cout
    kmat = full.reshape(n1 * 16, c1, c0, kh, kw).transpose(1, 3, 4, 2, 0).reshape(c1 * kh * kw * c0, n1 * 16)
    return nd_to_zn(kmat)


def im2col(x: np.ndarray, kh: int, kw: int, stride=(1, 1), padding=(0, 0), dilation=(1, 1)) -> np.ndarray:
    """(C, H, W) -> (Ho * Wo, C * kh * kw) with columns ordered (c, i, j), for reference checks."""
    c, h, w = x.shape
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    xp = np.zeros((c, h + 2 * ph, w + 2 * pw), dtype=x.dtype)
    xp[:, ph:ph + h, pw:pw + w] = x
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((ho, wo, c, kh, kw), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, :, i, j] = xp[:, i * dh:i * dh + sh * (ho - 1) + 1:sh,
                                     j * dw:j * dw + sw * (wo - 1) + 1:sw].transpose(1, 2, 0)
    return cols.reshape(ho * wo, c * kh * kw)
