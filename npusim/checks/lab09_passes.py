"""Checks of lab 09 (the whole model), the graph passes: BatchNorm folding (exercise 2), the conv + BN + ReLU
fusion pass (exercise 3) and the placement pass (exercise 4), on hidden weights and hidden graphs: a conv
whose output has two users, a bare conv -> ReLU, a ReLU that is only one of a conv's users, pooling the
device cannot run at its shapes."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import NpuSimError
from ._core import CheckFailed, call_learner, check_output, describe, fixed_rng, passed
from ._flow import Skeleton

__all__ = ["fold_bn", "graph_pass", "placement"]

_SETUP = "import numpy as np\nfrom npusim import checks as check\nfrom npusim import model as nm"
"""What a lab 09 skeleton needs outside the notebook: the lab's imports (and, for the graph pass, a fold)."""
_FOLD = ("def fold_bn(w, b, mean, var, gamma, beta, eps):\n"
         "    s = gamma / np.sqrt(var + eps)\n"
         "    b = np.zeros_like(mean) if b is None else b\n"
         "    return (w * s[:, None, None, None]).astype(np.float32), ((b - mean) * s + beta).astype(np.float32)\n")

HINTS = {
    "fold-bn": (
        "Inference BatchNorm is one multiply and one add per output channel. Write it after the conv's own "
        "'w * x + b' and collect the terms: what multiplies x is the new weight, the rest is the new bias.",
        "The factor per output channel comes from gamma, var and eps (which of BatchNorm's formulas?); it "
        "must scale each output channel of w, whose shape is (Cout, Cin, Kh, Kw): how does a Cout-long array "
        "broadcast over that? The bias collects everything that does not multiply x (the conv may have no "
        "bias). The contract says float32.",
        Skeleton(
            "def fold_bn(w, b, mean, var, gamma, beta, eps):\n"
            "    s = ___                                   # one factor per output channel\n"
            "    b = np.zeros_like(mean) if b is None else b\n"
            "    return (w * ___).astype(np.float32), (___).astype(np.float32)\n",
            call="check.fold_bn(fold_bn)", setup=_SETUP),
    ),
    "graph-pass": (
        "A conv's output may only change if nobody else reads it: a BatchNorm (or a ReLU) can be merged into "
        "the conv only when it is the conv's ONLY user, with or without a BatchNorm between conv and ReLU.",
        "For each conv, first the BatchNorm: when may it be folded (who else reads the conv?), with which "
        "statistics and which eps (each node has its own), and what must happen to the BatchNorm node and to "
        "the conv's record of what it absorbed? Then look at the conv's users again for a ReLU, under the "
        "same rule; a fused ReLU is an attribute of the conv.",
        Skeleton(
            "def fuse_conv_bn_relu(graph):\n"
            "    g = graph.copy()\n"
            "    for conv in [n for n in g.nodes if n.op == 'conv2d']:\n"
            "        users = g.users(conv.name)\n"
            "        if ___:\n"
            "            bn = users[0]\n"
            "            p = bn.params\n"
            "            conv.params = dict(zip(('w', 'b'), fold_bn(conv.params['w'], conv.params.get('b'), p['mean'],\n"
            "                                                       p['var'], p['gamma'], p['beta'], ___)))\n"
            "            g.bypass(bn.name)\n"
            "            conv.fused.append(bn.name)\n"
            "        users = g.users(conv.name)\n"
            "        if ___:\n"
            "            conv.attrs['relu'] = True\n"
            "            g.bypass(users[0].name)\n"
            "            conv.fused.append(users[0].name)\n"
            "    return g\n",
            call="check.graph_pass(fuse_conv_bn_relu)", setup=_SETUP + "\n" + _FOLD),
    ),
    "placement": (
        "A tensor crosses PCIe whenever its producer and a reader sit on different sides. Every op the NPU "
        "can run, at the shapes it sees in this model, belongs on the device; every other op must run on the "
        "host. The graph's input and output stay where they are.",
        "Work on a copy. Find every tensor's shape and dtype in this model (nm.infer), then ask, for each node, "
        "whether the device has a kernel for it at the shapes and dtypes of its inputs (nm.OPS[op] knows), "
        "and place it accordingly, both ways.",
        Skeleton(
            "def place_on_device(graph, input_shape):\n"
            "    g = graph.copy()\n"
            "    shapes, dtypes = nm.infer(g, input_shape)\n"
            "    for node in g.nodes:\n"
            "        if node.op in ('input', 'output'):\n"
            "            continue\n"
            "        ok = ___                        # can the device run this node at these shapes?\n"
            "        node.placement = 'device' if ok else 'host'\n"
            "    return g\n",
            call="check.placement(place_on_device)", setup=_SETUP),
    ),
}

#: The speed-up the learner's fusion pass must give on the hidden model (the reference pass reaches more;
#: folding alone reaches less: see tests/model/test_model_checks.py).
SPEEDUP_TARGET = 1.3

# --- exercise 2: fold BatchNorm ------------------------------------------------------------------------------

_FOLD_CASES = [  # (cout, cin, k, bias, eps, var scale): one channel, cin != cout (the axis), a conv bias, tiny
    (1, 1, 1, False, 1e-5, 1.0), (16, 3, 3, False, 1e-5, 1.0), (8, 4, 3, True, 1e-3, 1.0),  # variances (eps
    (32, 16, 1, True, 1e-5, 1e-4), (5, 7, 5, False, 0.1, 10.0), (6, 6, 3, True, 0.05, 0.02),  # counts), cin = cout
]


def _fold_causes(w, b, mean, var, gamma, beta, eps, wf, bf) -> str:
    """What the learner's (w', b') equals, among the known mistakes."""
    s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    close = lambda a, ref: a.shape == np.shape(ref) and np.allclose(a, ref, rtol=1e-5, atol=1e-6)  # noqa: E731
    b0 = np.zeros_like(s) if b is None else b.astype(np.float64)
    if close(wf, w * s[:, None, None, None]):
        if close(bf, b0 * s + beta):
            return "the folded bias forgets the mean: b' = (b - mean) * s + beta."
        if b is not None and close(bf, (0.0 - mean) * s + beta):
            return "the conv's own bias b is dropped: it is scaled by s too, b' = (b - mean) * s + beta."
        if close(bf, (b0 - mean) + beta):
            return "the bias is not scaled: b' = (b - mean) * s + beta."
        return "the weights are right; the bias is not: b' = (b - mean) * s + beta (b = 0 when the conv has none)."
    if w.shape[0] == w.shape[1] and close(wf, w * s[None, :, None, None]):
        return ("the weights are scaled along the INPUT channels (axis 1); BatchNorm scales each OUTPUT channel "
                "o (axis 0 of w, shape (Cout, Cin, Kh, Kw)).")
    if close(wf, w * (gamma / (var + eps))[:, None, None, None]):
        return "the weights are divided by var + eps; the BatchNorm divides by sqrt(var + eps)."
    if close(wf, w * (gamma / np.sqrt(var))[:, None, None, None]):
        return "eps is missing: s = gamma / sqrt(var + eps)."
    return "look at: each output channel o of w is scaled by s[o] = gamma[o] / sqrt(var[o] + eps)."


def fold_bn(fn: Callable) -> None:
    """Lab 09, exercise 2: ``fn(w, b, mean, var, gamma, beta, eps) -> (w', b')`` folds an inference
    BatchNorm into the conv before it (``b`` may be None) and returns float32 arrays, on hidden weights and
    statistics (one channel, Cin != Cout and Cin = Cout, a conv bias or none, tiny variances, a large eps)."""
    __tracebackhide__ = True
    from ..model.opset import batchnorm_host, conv2d_host

    name = "fold_bn"
    explain = {ValueError: "w has shape (Cout, Cin, Kh, Kw): a per-channel factor of Cout values needs the shape "
                           "(Cout, 1, 1, 1) to broadcast.",
               TypeError: "b may be None (a conv without bias): use zeros then."}
    for i, (cout, cin, k, has_b, eps, vs) in enumerate(_FOLD_CASES):
        rng = fixed_rng(name, i)
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32) if has_b else None
        mean, beta = rng.normal(0, 0.5, cout).astype(np.float32), rng.normal(0, 0.5, cout).astype(np.float32)
        var = (rng.uniform(0.1, 2.0, cout) * vs).astype(np.float32)
        gamma = rng.uniform(-1.5, 1.5, cout).astype(np.float32)
        case = {"cout": cout, "cin": cin, "kernel": f"{k}x{k}", "conv bias": "yes" if has_b else "None", "eps": eps}
        out = call_learner(name, fn, w.copy(), None if b is None else b.copy(), mean.copy(), var.copy(),
                           gamma.copy(), beta.copy(), eps, case=case, explain=explain)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise CheckFailed(name, f"return the pair (w_folded, b_folded), got {type(out).__name__}")
        wf = check_output(name, out[0], shape=w.shape, dtype=np.float32, what=f"on [{describe(case)}] w'")
        bf = check_output(name, out[1], shape=(cout,), dtype=np.float32, what=f"on [{describe(case)}] b'")
        s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
        want_w = w * s[:, None, None, None]
        want_b = ((b if b is not None else 0.0) - mean.astype(np.float64)) * s + beta
        if not (np.allclose(wf, want_w, rtol=1e-5, atol=1e-6) and np.allclose(bf, want_b, rtol=1e-5, atol=1e-5)):
            bad = "weights are" if not np.allclose(wf, want_w, rtol=1e-5, atol=1e-6) else "bias is"
            err = np.abs((wf if bad == "weights are" else bf) - (want_w if bad == "weights are" else want_b)).max()
            raise CheckFailed(name, f"on [{describe(case)}] the folded {bad} wrong (max error {err:.3g}): "
                              + _fold_causes(w, b, mean, var, gamma, beta, eps, wf, bf))
        # and the point of it all: one conv now computes what conv + BN did
        x = rng.standard_normal((2, cin, k + 3, k + 2)).astype(np.float32)
        y0 = batchnorm_host(conv2d_host(x, w, b), mean, var, gamma, beta, eps)
        y1 = conv2d_host(x, wf, bf)
        if not np.allclose(y1, y0, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(y0).max()))):
            raise CheckFailed(name, f"on [{describe(case)}] conv with your (w', b') differs from conv then BatchNorm")
    passed(name, f"{len(_FOLD_CASES)} hidden convs and BatchNorms (Cin != Cout and Cin = Cout, with and without a "
                 f"conv bias, eps up to 0.1), float32 out")


# --- exercise 3: the fusion pass ------------------------------------------------------------------------------

def _bn(rng, c):
    return {"mean": rng.normal(0, 0.3, c).astype(np.float32), "var": rng.uniform(0.5, 2, c).astype(np.float32),
            "gamma": rng.uniform(0.5, 1.5, c).astype(np.float32), "beta": rng.normal(0, 0.3, c).astype(np.float32)}


def _w(rng, co, ci):
    return (rng.standard_normal((co, ci, 3, 3)) * np.sqrt(2 / (9 * ci))).astype(np.float32)


def _graph(nodes, name):
    from ..model.graph import Graph
    from ..model.opset import default_placement

    return default_placement(Graph(nodes, name))


def _branchy():
    """A conv whose output feeds its BN and an add (the BN must stay), and a conv with a bias."""
    from ..model.graph import Node as N

    rng = np.random.default_rng(77)
    conv = {"stride": 1, "padding": 1, "dilation": 1}
    return _graph([N("x", "input"),
                   N("ca", "conv2d", ["x"], dict(conv), {"w": _w(rng, 8, 3), "b": rng.normal(0, 0.2, 8).astype(np.float32)}),
                   N("ba", "batchnorm", ["ca"], {"eps": 0.05}, _bn(rng, 8)),  # an eps far from 0 and 1e-5
                   N("ra", "relu", ["ba"]),
                   N("cb", "conv2d", ["ra"], dict(conv), {"w": _w(rng, 8, 8)}),
                   N("bb", "batchnorm", ["cb"], {"eps": 1e-5}, _bn(rng, 8)),
                   N("sum", "add", ["bb", "cb"]),
                   N("rb", "relu", ["sum"]),
                   N("flat", "flatten", ["rb"]),
                   N("fc", "linear", ["flat"], {}, {"w": (rng.standard_normal((5, 8 * 8 * 8)) / 20).astype(np.float32),
                                                    "b": np.zeros(5, np.float32)}),
                   N("output", "output", ["fc"])], "hidden_branchy")


def _relus():
    """A bare conv -> ReLU (fused), a conv read by a ReLU and an add (not fused), then conv -> BN -> ReLU."""
    from ..model.graph import Node as N

    rng = np.random.default_rng(78)
    conv = {"stride": 1, "padding": 1, "dilation": 1}
    return _graph([N("x", "input"),
                   N("c1", "conv2d", ["x"], dict(conv), {"w": _w(rng, 8, 3), "b": rng.normal(0, 0.2, 8).astype(np.float32)}),
                   N("r1", "relu", ["c1"]),
                   N("c2", "conv2d", ["r1"], dict(conv), {"w": _w(rng, 8, 8)}),
                   N("r2", "relu", ["c2"]),
                   N("mix", "add", ["r2", "c2"]),
                   N("c3", "conv2d", ["mix"], dict(conv), {"w": _w(rng, 8, 8)}),
                   N("b3", "batchnorm", ["c3"], {"eps": 1e-5}, _bn(rng, 8)),
                   N("r3", "relu", ["b3"]),
                   N("flat", "flatten", ["r3"]),
                   N("fc", "linear", ["flat"], {}, {"w": (rng.standard_normal((4, 8 * 8 * 8)) / 20).astype(np.float32)}),
                   N("output", "output", ["fc"])], "hidden_relus")


def _structure_causes(graph, want, out) -> str:
    """Which node the learner's pass kept, removed or mis-fused, and why that is wrong."""
    causes = []
    for n in out.nodes:
        if n.name in want:
            continue
        src = graph.node(n.inputs[0]) if n.inputs else None
        if n.op == "batchnorm":
            causes.append(f"BatchNorm {n.name} (the only user of conv {src.name}) is still in the graph: fold it "
                          f"into the conv and bypass it")
        elif n.op == "relu" and src is not None and src.op == "conv2d":
            causes.append(f"ReLU {n.name} right after conv {src.name} (no BatchNorm between them) is not fused: "
                          f"a bare conv -> ReLU is fused too")
        elif n.op == "relu":
            causes.append(f"ReLU {n.name} after the folded BatchNorm {src.name if src else '?'} is not fused")
    for n in want.nodes:
        if n.name in out:
            continue
        src = graph.node(n.inputs[0])
        others = [u.name for u in graph.users(src.name) if u.name != n.name]
        if n.op == "batchnorm":
            causes.append(f"BatchNorm {n.name} was folded although conv {src.name}'s output also feeds {others}: "
                          f"that reader needs the plain conv output, so the BatchNorm must stay")
        elif n.op == "relu" and others:
            causes.append(f"ReLU {n.name} was fused although {src.name}'s output also feeds {others}, which would "
                          f"then read ReLU'd values: a ReLU is fused only when it is the conv's ONLY user")
        else:
            causes.append(f"{n.op} {n.name} was removed but must stay (only a BatchNorm or ReLU that is a conv's "
                          f"only user is merged into it)")
    relu = {n.name: bool(n.attrs.get("relu")) for n in want.nodes if n.op == "conv2d"}
    for n in out.nodes:
        if n.op == "conv2d" and bool(n.attrs.get("relu")) != relu.get(n.name) and n.name in relu:
            causes.append(f"conv {n.name} has relu={bool(n.attrs.get('relu'))}, expected {relu[n.name]}")
    return "; ".join(causes)


def _folded_params(name: str, graph, want, out, case: dict) -> None:
    """Each conv that absorbed a BatchNorm carries the weights and bias of that fold with the node's own
    statistics and eps (the outputs alone hide an eps of 0 or of PyTorch's default behind the tolerance)."""
    from ..model.passes import fold_bn as fold

    for n in out.nodes:
        bns = [f for f in n.fused if f in graph and graph.node(f).op == "batchnorm"] if n.op == "conv2d" else []
        if not bns or n.name not in want:
            continue
        ref, bn = want.node(n.name), graph.node(bns[0])
        w, b = n.params.get("w"), n.params.get("b")
        b = np.zeros(ref.params["w"].shape[0], np.float32) if b is None else b
        if np.shape(w) == ref.params["w"].shape and np.allclose(w, ref.params["w"], rtol=1e-5, atol=1e-7) and \
                np.allclose(b, ref.params["b"], rtol=1e-5, atol=1e-6):
            continue
        conv, p = graph.node(n.name), bn.params
        why = "look at the arguments you give fold_bn: w and b from the conv, mean, var, gamma, beta from " \
              "bn.params, eps from bn.attrs['eps']"
        fits = []   # (how far, eps) for the eps values a pass commonly uses instead of the node's
        for eps in (0.0, 1e-5, 1e-3):
            w_eps = fold(conv.params["w"], conv.params.get("b"), p["mean"], p["var"], p["gamma"], p["beta"], eps)[0]
            if eps != bn.attrs["eps"] and np.shape(w) == w_eps.shape and np.allclose(w, w_eps, rtol=1e-5, atol=1e-7):
                fits.append((float(np.abs(np.asarray(w, np.float64) - w_eps).max()), eps))
        if fits:
            eps = min(fits)[1]
            why = (f"they are the fold with eps = {eps:g}, but BatchNorm {bn.name} has eps = "
                   f"{bn.attrs['eps']:g}: pass each node's own bn.attrs['eps']")
        raise CheckFailed(name, f"on [{describe(case)}] conv {n.name} absorbed BatchNorm {bn.name}, but its "
                                f"weights and bias are not the fold of the two: {why}.")


def graph_pass(fn: Callable) -> None:
    """Lab 09, exercise 3: ``fn(graph) -> graph`` folds every BatchNorm that is a conv's only user into that
    conv and fuses the ReLU that is then its only user (also right after a conv), leaves its input graph
    unchanged, keeps the outputs (hidden models and batches) and makes the hidden CNN at least
    ``SPEEDUP_TARGET`` times faster."""
    __tracebackhide__ = True
    from ..model import Graph, evaluate, fuse_conv_bn_relu, images, run_model, small_cnn

    name = "graph_pass"
    cases = [(small_cnn(channels=(8, 16), image=16, seed=7, softmax=False), images(3, 16, seed=11),
              {"model": "CNN 3-8-16 ch, residual", "image": "16x16", "batch": 3}),
             (_branchy(), images(2, 8, seed=11), {"model": "a conv whose output feeds its BN and an add",
                                                  "image": "8x8", "batch": 2}),
             (_relus(), images(2, 8, seed=12), {"model": "a bare conv -> ReLU, a conv read by a ReLU and an add",
                                                "image": "8x8", "batch": 2})]
    for graph, x, case in cases:
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
        want = fuse_conv_bn_relu(graph)
        causes = _structure_causes(graph, want, out)
        if causes:
            raise CheckFailed(name, f"on [{describe(case)}] expected the nodes {[n.name for n in want.nodes]}, "
                                    f"got {[n.name for n in out.nodes]}: {causes}.")
        _folded_params(name, graph, want, out, case)
        ref = evaluate(graph, x)
        try:
            got = run_model(out, x, progress=False)
        except NpuSimError as e:
            raise CheckFailed(name, f"on [{describe(case)}] the fused graph does not run: {type(e).__name__}: {e}"
                              ) from None
        tol = 1e-2 * max(1.0, float(np.abs(ref).max()))
        err = float(np.abs(got.output.astype(np.float64) - ref).max())
        if not err <= tol:
            neg = [n.name for n in out.nodes if n.op == "conv2d" and not n.attrs.get("relu")
                   and any(m in graph and graph.node(m).op == "relu" for m in n.fused)]
            why = (f"conv {neg[0]} lists a fused ReLU but does not apply it: set conv.attrs['relu'] = True"
                   if neg else "the folded weights and bias (fold_bn), and which tensor the users of a removed "
                               "node read (g.bypass)")
            raise CheckFailed(name, f"on [{describe(case)}] the outputs changed: max error {err:.3g} against the "
                                    f"unfused model (tolerance {tol:.3g}). Look at: {why}.")
    graph, x, case = cases[0]
    base = run_model(graph, x, progress=False).model_time_us
    mine = run_model(fn(graph), x, progress=False).model_time_us
    ref = run_model(fuse_conv_bn_relu(graph), x, progress=False).model_time_us
    target = min(SPEEDUP_TARGET, 0.97 * base / ref)  # never more than the reference pass itself reaches
    if base / mine < target:
        raise CheckFailed(name, f"on [{describe(case)}] your pass makes the model {base / mine:.2f}x faster "
                                f"({base:.0f} -> {mine:.0f} us); expected at least {target:.2f}x (the reference: "
                                f"{base / ref:.2f}x). Look at: is every ReLU after a folded conv fused (relu=True)?")
    passed(name, f"outputs unchanged on {len(cases)} hidden models; the CNN is {base / mine:.2f}x faster "
                 f"({base:.0f} -> {mine:.0f} us, target {target:.2f}x)")


# --- exercise 4: the placement pass ---------------------------------------------------------------------------

def _placement_cases():
    from ..model import fuse_conv_bn_relu, resnet, small_cnn
    from ..model.graph import Node as N

    rng = np.random.default_rng(79)
    soft = _graph([N("x", "input"),
                   N("c", "conv2d", ["x"], {"padding": 1, "relu": True}, {"w": _w(rng, 4, 3)}),
                   N("p", "maxpool", ["c"], {"kernel": 2, "stride": 2, "padding": 0}),
                   N("s", "softmax", ["p"], {"dim": 1}),  # over the channels: the device softmax takes the last axis
                   N("c2", "conv2d", ["s"], {"padding": 1}, {"w": _w(rng, 4, 4)}),
                   N("g", "avgpool", ["c2"]),
                   N("output", "output", ["g"])], "hidden_softmax")
    return [(fuse_conv_bn_relu(resnet((1, 1), width=8, classes=10, seed=6)), (2, 3, 32, 32),
             {"model": "ResNet, 2 stages, width 8, BN folded", "input": "2x3x32x32"}),
            (small_cnn(channels=(8, 16), image=34, seed=2), (2, 3, 34, 34),
             {"model": "CNN as captured", "input": "2x3x34x34"}),
            (soft, (1, 3, 12, 12), {"model": "conv, max pool, softmax over the channels, conv, average pool",
                                    "input": "1x3x12x12"})]


def placement(fn: Callable) -> None:
    """Lab 09, exercise 4: ``fn(graph, input_shape) -> graph`` places on the device every node the NPU can run
    at the shapes it sees and every other node on the host (the graph's input and output stay on the host),
    returns a new graph, and on the hidden ResNet leaves exactly one upload (the batch) and one download (the
    result)."""
    __tracebackhide__ = True
    from ..model import DEVICE, HOST, Graph, OPS, images, infer, run_model

    name = "placement"
    for graph, shape, case in _placement_cases():
        before = graph.signature()
        out = call_learner(name, fn, graph, shape, case=case)
        if not isinstance(out, Graph):
            raise CheckFailed(name, f"return the new graph (a npusim.model.Graph), got {type(out).__name__}")
        if graph.signature() != before:
            raise CheckFailed(name, f"on [{describe(case)}] your pass changed the graph it was given. Work on "
                                    f"graph.copy() and return that.")
        if [n.name for n in out.nodes] != [n.name for n in graph.nodes]:
            raise CheckFailed(name, f"on [{describe(case)}] the nodes changed: a placement pass only sets "
                                    f"node.placement, it adds or removes nothing")
        shapes, dtypes = infer(graph, shape)
        for n in out.nodes:
            if n.op in ("input", "output"):
                if n.placement != HOST:
                    raise CheckFailed(name, f"on [{describe(case)}] the graph's {n.op} node {n.name!r} was moved to "
                                            f"the {n.placement}: the batch arrives on the host and the result is "
                                            f"read there; leave the input and output nodes alone")
                continue
            ins = [shapes[i] for i in n.inputs]
            can = OPS[n.op].on_device(n, ins, [dtypes[i] for i in n.inputs])
            if n.placement == DEVICE and not can:
                what = ("the NPU has no kernel for this op at all" if OPS[n.op].device is None else
                        f"the NPU's {n.op} kernel does not run these shapes or attributes ({n.describe()} on {ins})")
                was = graph.node(n.name).placement
                raise CheckFailed(name, f"on [{describe(case)}] node {n.name!r} ({n.op}) is placed on the device"
                                        + (" (where the graph had it)" if was == DEVICE else "")
                                        + f", but {what}: ask nm.OPS[node.op].on_device(node, input shapes, input "
                                          f"dtypes) with the shapes from nm.infer, and put it on the host if not")
            if n.placement != DEVICE and can:
                raise CheckFailed(name, f"on [{describe(case)}] node {n.name!r} ({n.describe()} on {ins}) stays on "
                                        f"the host though the device can run it, so its tensors cross PCIe: every "
                                        f"op with a device kernel for its shapes belongs on the device (not only "
                                        f"the ops of a fixed list)")
    graph, shape, case = _placement_cases()[0]
    x = images(shape[0], shape[2], seed=13)
    prof = run_model(call_learner(name, fn, graph, shape, case=case), x, progress=False)
    base = run_model(graph, x, progress=False)
    if (prof.uploads, prof.downloads) != (1, 1):
        raise CheckFailed(name, f"on [{describe(case)}] the placed model makes {prof.uploads} uploads and "
                                f"{prof.downloads} downloads; with everything on the device it is 1 and 1")
    passed(name, f"{len(_placement_cases())} hidden graphs placed as the device allows; the ResNet runs with 1 upload "
                 f"and 1 download, {base.model_time_us / prof.model_time_us:.2f}x faster than before the pass")
