"""Checks of lab 09 (the whole model): BatchNorm folding, and the conv + BN + ReLU fusion pass."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import NpuSimError
from ._core import CheckFailed, call_learner, describe, passed

__all__ = ["fold_bn", "graph_pass"]

#: The speed-up the learner's pass must give on the hidden model (the reference pass gives 1.34x: two host
#: round trips less per folded BatchNorm, one launch less per fused ReLU; folding alone gives 1.20x).
SPEEDUP_TARGET = 1.3

_FOLD_CASES = [  # (cout, cin, k, bias, eps, var scale)
    (1, 1, 1, False, 1e-5, 1.0), (16, 3, 3, False, 1e-5, 1.0), (8, 4, 3, True, 1e-3, 1.0),
    (32, 16, 1, True, 1e-5, 1e-4), (5, 7, 5, False, 0.1, 10.0),
]


def fold_bn(fn: Callable) -> None:
    """Lab 09, exercise 1: ``fn(w, b, mean, var, gamma, beta, eps) -> (w', b')`` folds an inference
    BatchNorm into the conv before it (``b`` may be None), on hidden weights and random BN statistics."""
    __tracebackhide__ = True
    from ..model.opset import batchnorm_host, conv2d_host

    name = "fold_bn"
    for i, (cout, cin, k, has_b, eps, vs) in enumerate(_FOLD_CASES):
        rng = np.random.default_rng(900 + i)
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32) if has_b else None
        mean, beta = rng.normal(0, 0.5, cout).astype(np.float32), rng.normal(0, 0.5, cout).astype(np.float32)
        var = (rng.uniform(0.1, 2.0, cout) * vs).astype(np.float32)
        gamma = rng.uniform(-1.5, 1.5, cout).astype(np.float32)
        case = {"cout": cout, "cin": cin, "kernel": f"{k}x{k}", "conv bias": "yes" if has_b else "None", "eps": eps}
        out = call_learner(name, fn, w.copy(), None if b is None else b.copy(), mean.copy(), var.copy(), gamma.copy(),
                    beta.copy(), eps, case=case)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CheckFailed(name, f"return the pair (w_folded, b_folded), got {type(out).__name__}")
        wf, bf = (np.asarray(a, np.float64) for a in out)
        s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
        want_w = w * s[:, None, None, None]
        want_b = ((b if b is not None else 0.0) - mean.astype(np.float64)) * s + beta
        if wf.shape != w.shape or bf.shape != (cout,):
            raise CheckFailed(name, f"on [{describe(case)}] expected w' of shape {w.shape} and b' of shape "
                                    f"({cout},), got {wf.shape} and {bf.shape}")
        if not np.allclose(wf, want_w, rtol=1e-4, atol=1e-6):
            raise CheckFailed(name, f"on [{describe(case)}] the folded weights are wrong (max error "
                                    f"{np.abs(wf - want_w).max():.3g}). Look at: each output channel o is scaled by "
                                    f"gamma[o] / sqrt(var[o] + eps); w has shape (Cout, Cin, Kh, Kw).")
        if not np.allclose(bf, want_b, rtol=1e-4, atol=1e-5):
            hint = " With b = None the conv has no bias: use 0." if b is None else ""
            raise CheckFailed(name, f"on [{describe(case)}] the folded bias is wrong (max error "
                                    f"{np.abs(bf - want_b).max():.3g}). Look at: b' = (b - mean) * s + beta.{hint}")
        # and the point of it all: one conv now computes what conv + BN did
        x = rng.standard_normal((2, cin, k + 3, k + 2)).astype(np.float32)
        y0 = batchnorm_host(conv2d_host(x, w, b), mean, var, gamma, beta, eps)
        y1 = conv2d_host(x, wf.astype(np.float32), bf.astype(np.float32))
        if not np.allclose(y1, y0, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(y0).max()))):
            raise CheckFailed(name, f"on [{describe(case)}] conv with your (w', b') differs from conv then BatchNorm")
    passed(name, f"{len(_FOLD_CASES)} hidden convs and BatchNorms (with and without conv bias, eps up to 0.1)")


def _branchy():
    """A hidden graph with a conv whose output has two users (its BN must stay) and a conv with a bias."""
    from ..model import graph as G
    from ..model.opset import default_placement

    rng = np.random.default_rng(77)

    def bn(c):
        return {"mean": rng.normal(0, 0.3, c).astype(np.float32), "var": rng.uniform(0.5, 2, c).astype(np.float32),
                "gamma": rng.uniform(0.5, 1.5, c).astype(np.float32), "beta": rng.normal(0, 0.3, c).astype(np.float32)}

    conv = {"stride": 1, "padding": 1, "dilation": 1}
    w = lambda co, ci: (rng.standard_normal((co, ci, 3, 3)) * np.sqrt(2 / (9 * ci))).astype(np.float32)  # noqa: E731
    nodes = [G.Node("x", "input"),
             G.Node("ca", "conv2d", ["x"], dict(conv), {"w": w(8, 3), "b": rng.normal(0, 0.2, 8).astype(np.float32)}),
             G.Node("ba", "batchnorm", ["ca"], {"eps": 1e-3}, bn(8)),
             G.Node("ra", "relu", ["ba"]),
             G.Node("cb", "conv2d", ["ra"], dict(conv), {"w": w(8, 8)}),
             G.Node("bb", "batchnorm", ["cb"], {"eps": 1e-5}, bn(8)),
             G.Node("sum", "add", ["bb", "cb"]),
             G.Node("rb", "relu", ["sum"]),
             G.Node("flat", "flatten", ["rb"]),
             G.Node("fc", "linear", ["flat"], {}, {"w": (rng.standard_normal((5, 8 * 8 * 8)) / 20).astype(np.float32),
                                                   "b": np.zeros(5, np.float32)}),
             G.Node("output", "output", ["fc"])]
    return default_placement(G.Graph(nodes, "hidden_branchy"))


def graph_pass(fn: Callable) -> None:
    """Lab 09, exercise 2: ``fn(graph) -> graph`` folds every BatchNorm that only a conv feeds into that conv
    and fuses the ReLU after it, leaves its input graph unchanged, keeps the outputs (hidden models and
    batches) and makes the hidden model at least ``SPEEDUP_TARGET`` times faster."""
    __tracebackhide__ = True
    from ..model import Graph, evaluate, fuse_conv_bn_relu, images, run_model, small_cnn

    name = "graph_pass"
    cases = [(small_cnn(channels=(8, 16), image=16, seed=7, softmax=False), 3,
              {"model": "CNN 3-8-16 ch, residual", "image": "16x16", "batch": 3}),
             (_branchy(), 2, {"model": "a conv whose output feeds a BN and an add", "image": "8x8", "batch": 2})]
    for graph, batch, case in cases:
        image = 16 if case["image"] == "16x16" else 8
        x = images(batch, image, seed=11)
        before = graph.signature()
        out = call_learner(name, fn, graph, case=case)
        if not isinstance(out, Graph):
            raise CheckFailed(name, f"return the new graph (a npusim.model.Graph), got {type(out).__name__}")
        if graph.signature() != before:
            raise CheckFailed(name, f"on [{describe(case)}] your pass changed the graph it was given. Work on "
                                    f"graph.copy() and return that.")
        try:
            out.validate()
        except NpuSimError as e:
            raise CheckFailed(name, f"on [{describe(case)}] the returned graph is broken: {e}") from None
        # structure: what the reference pass fuses, yours must too; what it keeps, yours must keep
        want = fuse_conv_bn_relu(graph)
        kept = [n.name for n in out.nodes if n.name not in want]
        lost = [n.name for n in want.nodes if n.name not in out]
        relu = {n.name: bool(n.attrs.get("relu")) for n in want.nodes if n.op == "conv2d"}
        wrong_relu = [n.name for n in out.nodes if n.op == "conv2d" and bool(n.attrs.get("relu")) != relu.get(n.name)]
        if kept or lost or wrong_relu:
            what = "; ".join(x for x in (f"still there (should be fused): {kept}" if kept else "",
                                          f"removed (must stay): {lost}" if lost else "",
                                          f"conv relu attribute wrong: {wrong_relu}" if wrong_relu else "") if x)
            raise CheckFailed(name, f"on [{describe(case)}] expected the nodes {[n.name for n in want.nodes]}; {what}. "
                                    f"Look at: fold a BatchNorm only when it is the conv's ONLY user "
                                    f"(g.users(conv.name)); fuse a ReLU only when it is then the conv's only user, "
                                    f"with conv.attrs['relu'] = True.")
        ref = evaluate(graph, x)
        try:
            got = run_model(out, x)
        except NpuSimError as e:
            raise CheckFailed(name, f"on [{describe(case)}] the fused graph does not run: {type(e).__name__}: {e}"
                              ) from None
        tol = 1e-2 * max(1.0, float(np.abs(ref).max()))
        err = float(np.abs(got.output.astype(np.float64) - ref).max())
        if not err <= tol:
            raise CheckFailed(name, f"on [{describe(case)}] the outputs changed: max error {err:.3g} against the "
                                    f"unfused model (tolerance {tol:.3g}). Look at: the folded weights and bias "
                                    f"(fold_bn), and which tensor the users of a removed node read (g.bypass).")
    graph, batch, case = cases[0]
    x = images(batch, 16, seed=11)
    base = run_model(graph, x).model_time_us
    mine = run_model(fn(graph), x).model_time_us
    ref = run_model(fuse_conv_bn_relu(graph), x).model_time_us
    target = min(SPEEDUP_TARGET, 0.97 * base / ref)  # never more than the reference pass itself reaches
    if base / mine < target:
        raise CheckFailed(name, f"on [{describe(case)}] your pass makes the model {base / mine:.2f}x faster "
                                f"({base:.0f} -> {mine:.0f} us); expected at least {target:.2f}x (the reference: "
                                f"{base / ref:.2f}x). Look at: is every ReLU after a folded conv fused (relu=True)?")
    passed(name, f"outputs unchanged on 2 hidden models; the model is {base / mine:.2f}x faster "
                 f"({base:.0f} -> {mine:.0f} us, target {target:.2f}x)")
