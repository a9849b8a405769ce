"""The reference itself: torch and the numpy fallback agree, and both agree with a plain loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conv_reference import HAVE_TORCH, conv2d_numpy, conv2d_reference

pytestmark = pytest.mark.conv


def _loop_conv(x, w, b, s, p, d):
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = (h + 2 * p - d * (kh - 1) - 1) // s + 1
    wo = (wd + 2 * p - d * (kw - 1) - 1) // s + 1
    out = np.zeros((n, cout, ho, wo))
    for bb in range(n):
        for o in range(cout):
            for y in range(ho):
                for xx in range(wo):
                    acc = 0.0 if b is None else float(b[o])
                    for c in range(cin):
                        for i in range(kh):
                            for j in range(kw):
                                r, q = y * s - p + i * d, xx * s - p + j * d
                                if 0 <= r < h and 0 <= q < wd:
                                    acc += float(x[bb, c, r, q]) * float(w[o, c, i, j])
                    out[bb, o, y, xx] = acc
    return out


def test_numpy_path_matches_a_plain_loop():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 6))
    w = rng.standard_normal((4, 3, 3, 2))
    b = rng.standard_normal(4)
    for s, p, d in ((1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 1, 2)):
        np.testing.assert_allclose(conv2d_numpy(x, w, b, s, p, d), _loop_conv(x, w, b, s, p, d), rtol=1e-12, atol=1e-12)


def test_integers_take_the_exact_numpy_path():
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (1, 5, 6, 6)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 5, 3, 3)).astype(np.int8)
    out = conv2d_reference(x, w, padding=1)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, _loop_conv(x.astype(np.float64), w.astype(np.float64), None, 1, 1, 1))


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed: only the numpy path runs")
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(n=st.integers(1, 2), cin=st.integers(1, 6), cout=st.integers(1, 6), h=st.integers(1, 9), w=st.integers(1, 9),
       k=st.integers(1, 4), s=st.integers(1, 3), p=st.integers(0, 2), d=st.integers(1, 2), bias=st.booleans())
def test_torch_and_numpy_paths_agree(n, cin, cout, h, w, k, s, p, d, bias):
    if h + 2 * p < d * (k - 1) + 1 or w + 2 * p < d * (k - 1) + 1:
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float16)
    wt = rng.standard_normal((cout, cin, k, k)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    np.testing.assert_allclose(conv2d_reference(x, wt, b, s, p, d, use_torch=True),
                               conv2d_reference(x, wt, b, s, p, d, use_torch=False), rtol=1e-12, atol=1e-12)
