"""``npusim bench --compare triton``: cases (a)-(c) beside Triton's CPU interpreter, in one run.

The Triton kernels compute the same results the usual way (a masked block add; a blocked ``tl.dot`` matmul
with 64 x 64 x 64 blocks; an implicit-GEMM 3x3 convolution on the NCHW image, im2col done in the loads),
run by ``TRITON_INTERPRET=1`` on CPU torch tensors: results only, no timing model, no hazard checks. npusim
runs its kernels with numerics, timing and the sanitizer on. Each kernel's Triton and npusim runs
alternate, so a shared machine slows both alike: compare the ratio. Triton is not a dependency of npusim
(``pip install triton``); without it the case says so.
"""

from __future__ import annotations

import os

import numpy as np

from . import case, measure
from .conv import REFERENCE_LAYER, conv_inputs, simulate_conv
from .core import MATMUL, VECTOR_ADD, matmul_inputs, simulate_matmul, simulate_vector_add, vector_add_inputs

#: The issue's target: npusim at least this many times faster than the interpreter on every kernel.
TARGET_SPEEDUP = 10.0


def _kernels():
    """The three Triton kernels, compiled for the interpreter (imported here: Triton is optional)."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import triton
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, K, N, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

    @triton.jit
    def conv3x3(x_ptr, w_ptr, y_ptr, C, H, W, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        # output pixels x output channels, K = C * 9 in (c, i, j) order; pad 1, stride 1
        p = tl.program_id(0) * BM + tl.arange(0, BM)
        co = tl.program_id(1) * BN + tl.arange(0, BN)
        oh, ow = p // W, p % W
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, C * 9, BK):
            kk = k0 + tl.arange(0, BK)
            c, i, j = kk // 9, (kk % 9) // 3, kk % 3
            ih = oh[:, None] + i[None, :] - 1
            iw = ow[:, None] + j[None, :] - 1
            inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (p[:, None] < H * W)
            a = tl.load(x_ptr + (c[None, :] * H + ih) * W + iw, mask=inside, other=0.0)
            b = tl.load(w_ptr + co[None, :] * (C * 9) + kk[:, None])
            acc += tl.dot(a, b)
        tl.store(y_ptr + co[None, :] * (H * W) + p[:, None], acc.to(tl.float16), mask=p[:, None] < H * W)

    return triton, add, matmul, conv3x3


@case("compare_triton", slow=True)
def bench_compare_triton(repeat: int) -> dict:
    """Cases (a)-(c) beside Triton's CPU interpreter (``pip install triton``; TRITON_INTERPRET=1), one run."""
    try:
        import torch
        triton, add, matmul, conv3x3 = _kernels()
    except ImportError as e:
        return {"kernel": "compare_triton", "error": f"needs torch and triton ({e}): pip install triton, then "
                                                     f"npusim bench --compare triton"}
    out: dict = {"kernel": "compare_triton", "triton": triton.__version__, "target_speedup": TARGET_SPEEDUP}

    x, y = vector_add_inputs()
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    tz = torch.empty_like(tx)
    tile = VECTOR_ADD["tile"]
    out["vector_add"], _ = _pair(lambda: simulate_vector_add(x, y),
                              lambda: add[(x.size // tile,)](tx, ty, tz, x.size, BLOCK=tile), repeat)
    assert np.array_equal(tz.numpy(), x + y)

    a, b = matmul_inputs()
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    s, bs = MATMUL["size"], MATMUL["block"]
    tc = torch.empty((s, s), dtype=torch.float32)
    out["matmul"], _ = _pair(lambda: simulate_matmul(a, b),
                          lambda: matmul[(s // bs, s // bs)](ta, tb, tc, s, s, BM=bs, BN=bs, BK=bs), repeat)
    assert np.allclose(tc.numpy(), a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-2)

    L = REFERENCE_LAYER
    xi, w = conv_inputs()
    txi, tw = torch.from_numpy(xi), torch.from_numpy(w.reshape(L["cout"], -1).copy())
    ty2 = torch.empty((L["cout"], L["h"] * L["w"]), dtype=torch.float16)
    grid = (-(-L["h"] * L["w"] // 64), L["cout"] // 64)
    out["conv2d_img2col"], res = _pair(
        lambda: simulate_conv(xi, w),
        lambda: conv3x3[grid](txi, tw, ty2, L["cin"], L["h"], L["w"], BM=64, BN=64, BK=64), repeat)
    ref = res.output.reshape(L["cout"], -1).astype(np.float32)
    assert np.allclose(ty2.numpy().astype(np.float32), ref, rtol=2e-2, atol=2e-2)

    out["meets_target"] = all(out[k]["speedup"] >= TARGET_SPEEDUP for k in ("vector_add", "matmul", "conv2d_img2col"))
    return out


def _pair(sim, interp, repeat: int) -> tuple[dict, object]:
    """Median seconds of npusim and the Triton interpreter, alternating, how many times faster npusim is, and
    npusim's last result."""
    sim_s, triton_s, result = measure(sim, interp, repeat)
    return {"npusim_s": round(sim_s, 5), "triton_interpreter_s": round(triton_s, 5),
            "speedup": round(triton_s / sim_s, 1)}, result
