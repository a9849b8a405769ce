"""The reference Conv2D the kernels are checked against, and the tolerances.

``conv2d_reference`` uses ``torch.nn.functional.conv2d`` in float64 when torch is importable, else a
float64 (int64 for integers) numpy implementation; ``use_torch`` picks one explicitly so that the tests
can run both and compare them.
"""

from __future__ import annotations

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - CI installs torch
    torch = None

HAVE_TORCH = torch is not None


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d_numpy(x, w, bias=None, stride=1, padding=0, dilation=1) -> np.ndarray:
    """Conv2D as a sum over the taps, in float64 (int64 for integer inputs): no im2col, no torch."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    wide = np.int64 if np.issubdtype(np.asarray(x).dtype, np.integer) else np.float64
    x = np.asarray(x).astype(wide)
    w = np.asarray(w).astype(wide)
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, cin, h + 2 * ph, wd + 2 * pw), dtype=wide)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    out = np.zeros((n, cout, ho, wo), dtype=wide)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if bias is not None:
        out += np.asarray(bias).astype(wide)[None, :, None, None]
    return out


def conv2d_reference(x, w, bias=None, stride=1, padding=0, dilation=1, *, use_torch: bool | None = None) -> np.ndarray:
    """The exact result for the given (already rounded) inputs: float64, or int64 for integers.

    torch's CPU conv2d has no integer kernels, so integers always take the numpy path."""
    integer = np.issubdtype(np.asarray(x).dtype, np.integer)
    if use_torch is None:
        use_torch = HAVE_TORCH and not integer
    if not use_torch or integer:
        return conv2d_numpy(x, w, bias, stride, padding, dilation)
    t = lambda a: torch.from_numpy(np.asarray(a).astype(np.float64))  # noqa: E731
    out = F.conv2d(t(x), t(w), None if bias is None else t(bias), stride=_pair(stride), padding=_pair(padding),
                   dilation=_pair(dilation))
    return out.numpy()


def assert_conv_close(out: np.ndarray, ref: np.ndarray, in_dtype, k: int, scale: float = 1.0) -> None:
    """Compare with dtype-appropriate tolerances. ``k`` = Cin * Kh * Kw terms per output, each of magnitude
    about ``scale``. fp16: rtol = atol = sqrt(K) * 2^-11 (times the term scale); fp32: about 1e-5; int8: exact."""
    name = np.dtype(in_dtype).name
    assert out.shape == ref.shape, f"shape {out.shape} != reference {ref.shape}"
    if name == "int8":
        np.testing.assert_array_equal(out.astype(np.int64), ref.astype(np.int64))
        return
    got = out.astype(np.float64)
    if name == "float32":
        tol = 1e-5
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.sqrt(k) * scale)
        return
    tol = np.sqrt(k) * 2.0 ** -11
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale)
