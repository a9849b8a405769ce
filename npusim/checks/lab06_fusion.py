"""Checks of lab 06 (Conv2D + ReLU fusion): the GM round trip a separate ReLU costs, and a fused ReLU epilogue
that gives exactly the separate pair's output, faster."""

from __future__ import annotations

import numpy as np

from ..conv import ConvGeometry
from ..conv.api import run_img2col
from ._core import CheckFailed, call_learner, compare, describe, passed

__all__ = ["round_trip_bytes", "fused_relu_drain"]

# (n, cin, h, w, cout, k, stride, padding, bias, block_dim): odd sizes, stride 2, padding, batch 2, Cin and
# Cout not multiples of 16, Cout below 16 (one fractal column) and above (several), a band of padding only
_FUSION_CASES = [
    (1, 3, 7, 9, 5, 3, 1, 1, False, 1),
    (2, 19, 11, 13, 21, 3, 2, 1, True, 1),
    (1, 16, 16, 16, 32, 1, 1, 0, False, 2),
    (2, 7, 9, 6, 40, 5, 2, 2, True, 3),
    (1, 33, 8, 8, 17, 2, 1, 0, False, 1),
    (1, 4, 5, 5, 3, 1, 2, 3, True, 1),
]
SPEEDUP_TARGET = 1.35
"""The fused kernel must be this much faster than the separate pair on :data:`SPEED_LAYER` ('classic'). The
model gives 1.50x for the reference drain; serialising the drain (e.g. a PipeBarrier) gives about 0.95x."""
SPEED_LAYER = (1, 32, 28, 28, 32, 3, 1, 1)


def _inputs(case, seed):
    n, cin, h, w, cout, k, s, p, bias, _ = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float16)
    wt = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    return x, wt, b


def _case_words(case) -> dict:
    n, cin, h, w, cout, k, s, p, bias, bd = case
    return {"input": f"{n}x{cin}x{h}x{w}", "cout": cout, "kernel": f"{k}x{k}", "stride": s, "padding": p,
            "bias": bias, "block_dim": bd, "config": "classic", "dtype": "float16"}


def round_trip_bytes(fn) -> None:
    """Lab 06, exercise 1: ``fn(x_shape, w_shape, stride, padding, itemsize)`` returns the GM bytes that a
    separate ReLU kernel moves after the convolution (and that fusion removes), on hidden layers."""
    __tracebackhide__ = True
    name = "round_trip_bytes"
    layers = [((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 2), ((2, 3, 17, 13), (10, 3, 5, 5), 2, 2, 2),
              ((1, 256, 14, 14), (512, 256, 1, 1), 2, 0, 2), ((4, 8, 9, 9), (3, 8, 3, 3), 1, 0, 4)]
    for x_shape, w_shape, s, p, isz in layers:
        case = {"x": x_shape, "w": w_shape, "stride": s, "padding": p, "bytes per element": isz}
        got = call_learner(name, fn, x_shape, w_shape, s, p, isz, case=case, what="your function")
        g = ConvGeometry.of(x_shape, w_shape, s, p)
        want = 2 * g.n * g.cout * g.ho * g.wo * isz
        if not isinstance(got, (int, np.integer)) or int(got) != want:
            raise CheckFailed(name, f"on [{describe(case)}] expected {want:,} B, got {got!r}. Look at: the output "
                                    f"size (Ho = (H + 2*pad - Kh) // stride + 1) and how many times the ReLU "
                                    f"kernel moves each output element over the GM port (it reads y, and "
                                    f"writes it back).")
    passed(name, f"{len(layers)} hidden layers: the ReLU kernel reads and writes the output once each")


def fused_relu_drain(drain_cls) -> None:
    """Lab 06, exercise 2: the img2col kernel on 'classic' with ``drain_cls`` as its drain and a fused ReLU gives
    exactly the output of the separate pair (conv kernel, then the ReLU kernel) on hidden shapes, with a clean
    sanitizer run, and is at least :data:`SPEEDUP_TARGET` times faster than the pair on :data:`SPEED_LAYER`."""
    __tracebackhide__ = True
    name = "fused_relu_drain"
    for i, case in enumerate(_FUSION_CASES):
        n, cin, h, w, cout, k, s, p, bias, bd = case
        x, wt, b = _inputs(case, 600 + i)
        words = _case_words(case)
        sep = run_img2col(x, wt, b, s, p, relu=True, fuse=False, config="classic", block_dim=bd)
        fused = call_learner(name, run_img2col, x, wt, b, s, p, relu=True, drain=drain_cls, config="classic",
                             block_dim=bd, case=words, what="the fused kernel")
        compare(name, fused.output, sep.output, words,
                look_at="the order of the stages (L0C -> UB, cast to the output dtype with CAST_RINT, ReLU) and the "
                        "NZ -> ND copy into the queue's tensor before it goes out (Cout above 16 has several blocks)")
    n, cin, h, w, cout, k, s, p = SPEED_LAYER
    case = (*SPEED_LAYER, False, 1)
    x, wt, b = _inputs(case, 699)
    words = _case_words(case)
    sep = run_img2col(x, wt, None, s, p, relu=True, fuse=False, config="classic")
    fused = call_learner(name, run_img2col, x, wt, None, s, p, relu=True, drain=drain_cls, config="classic",
                         case=words, what="the fused kernel")
    t_sep, t_fused = sep.kernels_profile.time_us, fused.profile.time_us
    speed = t_sep / t_fused
    if speed < SPEEDUP_TARGET:
        raise CheckFailed(name, f"on [{describe(words)}] the fused kernel takes {t_fused:.2f} us against "
                                f"{t_sep:.2f} us for the separate pair: {speed:.2f}x, expected at least "
                                f"{SPEEDUP_TARGET:.2f}x. Look at the timeline (views.timeline(result.profile)): the "
                                f"drain of one tile should overlap the Mmads of the next; a PipeBarrier or a "
                                f"wait on the wrong stage serialises them. The queue calls are all the "
                                f"synchronisation this drain needs.")
    passed(name, f"{len(_FUSION_CASES)} hidden shapes give exactly the separate pair's values; "
                 f"{speed:.2f}x faster than the pair on {SPEED_LAYER[0]}x{cin}x{h}x{w} -> {cout}, {k}x{k} "
                 f"(target {SPEEDUP_TARGET:.2f}x)")
