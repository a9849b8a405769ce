"""``npusim bench`` cases of the Conv2D kernels.

``conv2d_img2col``: the img2col variant on the reference layer (batch 1, 56x56x64 -> 64, 3x3, stride 1,
pad 1, fp16), as a user calls it: the NCHW -> NC1HWC0 transform, the convolution and the NHWC -> NCHW
transform, three launches with numerics, timing and the sanitizer on. Beside it, in the same run, the
numpy floor: im2col of the padded image and one fp32 matmul.
"""

from __future__ import annotations

import numpy as np

from . import case, line, measure

REFERENCE_LAYER = dict(n=1, cin=64, h=56, w=56, cout=64, k=3, stride=1, pad=1)


def conv_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The image (NCHW) and weights (OIHW) of the reference layer, fp16."""
    L = REFERENCE_LAYER
    rng = np.random.default_rng(0)
    x = rng.standard_normal((L["n"], L["cin"], L["h"], L["w"])).astype(np.float16)
    k = L["cin"] * L["k"] ** 2
    w = (rng.standard_normal((L["cout"], L["cin"], L["k"], L["k"])) / np.sqrt(k)).astype(np.float16)
    return x, w


def simulate_conv(x: np.ndarray, w: np.ndarray):
    """The reference layer as a user calls it: three launches (both transforms and the convolution)."""
    from ..conv.api import run_img2col

    L = REFERENCE_LAYER
    return run_img2col(x, w, padding=L["pad"], stride=L["stride"])


@case("conv2d_img2col")
def bench_conv2d_img2col(repeat: int) -> dict:
    """(c) conv2d, img2col variant, 1x64x56x56 -> 64, 3x3, pad 1, fp16 -> fp16, one block."""
    from ..formats import im2col

    L = REFERENCE_LAYER
    x, w = conv_inputs()
    k = L["cin"] * L["k"] ** 2
    w_mat = w.reshape(L["cout"], -1).T.astype(np.float32)          # (Cin*Kh*Kw, Cout), columns in (c, i, j) order

    def floor() -> np.ndarray:
        cols = im2col(x[0], L["k"], L["k"], (L["stride"],) * 2, (L["pad"],) * 2)
        return (cols.astype(np.float32) @ w_mat).T.reshape(1, L["cout"], L["h"], L["w"]).astype(np.float16)

    sim_s, np_s, res = measure(lambda: simulate_conv(x, w), floor, repeat)
    ref = floor().astype(np.float64)
    tol = np.sqrt(k) * 2.0 ** -11
    assert np.allclose(res.output.astype(np.float64), ref, rtol=4 * tol, atol=4 * tol * np.abs(ref).max())
    p = res.profile   # the kernel's profile is the convolution launch
    return line("conv2d_img2col", sim_s, np_s, p, layer="1x64x56x56->64 3x3 s1 p1 fp16",
                mac_utilization=round(p.mac_utilization, 4), launches=1 + len(res.transforms),
                instructions_total=p.instruction_count + sum(t.instruction_count for t in res.transforms.values()),
                transforms_us=round(sum(t.time_us for t in res.transforms.values()), 3), target_sim_s=0.060)
