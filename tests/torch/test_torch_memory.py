"""Tensors saved for backward are released by the backward: no leak (the adapter's SavedTensorMeter and
plain weakrefs), and nothing piles up over training steps."""

from __future__ import annotations

import gc
import weakref

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import npusim.torch as nt  # noqa: E402

pytestmark = pytest.mark.lab08


def _model(compute_dtype=None):
    torch.manual_seed(0)
    return nn.Sequential(nt.NPUConv2d(1, 3, 3, padding=1, relu=True, compute_dtype=compute_dtype),
                         nn.MaxPool2d(2),
                         nt.NPUConv2d(3, 4, 3, padding=1, compute_dtype=compute_dtype),
                         nn.Flatten(), nt.NPULinear(4 * 3 * 3, 2, compute_dtype=compute_dtype))


@pytest.mark.parametrize("compute_dtype", [None, torch.float16], ids=["fp32", "fp16-compute"])
def test_meter_sees_every_saved_tensor_released_after_backward(compute_dtype):
    model = _model(compute_dtype)
    x, target = torch.randn(2, 1, 6, 6), torch.tensor([0, 1])
    meter = nt.SavedTensorMeter(model)
    with meter:
        loss = nn.functional.cross_entropy(model(x), target)
        held = meter.live_count
        meter.mark("backward")
        loss.backward()
    assert held > 0 and meter.peak_bytes > 0
    # `loss` (and so the whole graph) is still alive here: the saved tensors must be gone anyway
    assert meter.live_count == 0 and meter.live_bytes == 0, meter.summary()
    layers = meter.by_layer()
    assert {"0: NPUConv2d", "2: NPUConv2d", "4: NPULinear", "1: MaxPool2d"} <= set(layers), layers
    frees = [e for e in meter.events if e.kind == "free"]
    assert len(frees) == meter.saved_count and all(e.phase == "backward" for e in frees)
    del loss


def test_shared_storage_is_counted_once():
    """The fused conv+ReLU saves its output; the max-pool after it saves the same tensor as its input."""
    model = _model()
    meter = nt.SavedTensorMeter(model)
    with meter:
        y = model[1](model[0](torch.randn(1, 1, 6, 6, requires_grad=True)))
    relu_out = [e for e in meter.events if e.kind == "save" and e.shape == (1, 3, 6, 6)]
    assert len(relu_out) >= 2                       # saved by conv (mask) and by the pool (input)
    assert sum(e.new_bytes for e in relu_out) == 1 * 3 * 6 * 6 * 4   # ... but held once
    del y


def _npusim_node(fn):
    """The first node of an npusim custom operator in the graph behind ``fn`` (its ctx object)."""
    todo, seen = [fn], set()
    while todo:
        f = todo.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        if "npusim" in type(f).__name__:
            return f
        todo += [g for g, _ in f.next_functions]
    raise AssertionError("no npusim node in the graph")


def test_meter_does_not_change_gradients():
    model = _model()
    x = torch.randn(2, 1, 6, 6)
    model(x).square().sum().backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with nt.SavedTensorMeter(model):
        model(x).square().sum().backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(plain, model.parameters()))


def test_tensors_created_in_forward_are_freed_by_backward_weakref_proof():
    """Without the meter: record a weakref to every tensor autograd saves (identity hooks), run backward
    while the output is still alive, and check (with the garbage collector off, so that only reference
    counting frees anything) that every saved tensor created during the forward is gone. With
    compute_dtype=fp16 these are the fp16 copies of the input and weights, saved by npusim::conv2d."""
    model = _model(torch.float16)
    x = torch.randn(2, 1, 6, 6)
    refs: list[weakref.ref] = []
    keep = {id(p) for p in model.parameters()} | {id(x)}

    def pack(t):
        if id(t) not in keep:
            refs.append(weakref.ref(t))
        return t

    gc.collect()
    gc.disable()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x).float().sum()
        assert len(refs) >= 6 and sum(r() is not None for r in refs) == len(refs)
        node = weakref.ref(_npusim_node(out.grad_fn))   # the ctx of an npusim operator
        out.backward()
        assert out.grad_fn is not None             # the graph still exists...
        alive = [tuple(r().shape) for r in refs if r() is not None]
        assert alive == [], f"saved tensors still alive after backward: {alive}"   # ...its saved tensors not
        del out
        assert node() is None, "the autograd graph is kept alive by a reference cycle"
    finally:
        gc.enable()


def test_no_growth_over_training_steps():
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, target = torch.randn(2, 1, 6, 6), torch.tensor([1, 0])
    peaks = []
    for _ in range(3):
        meter = nt.SavedTensorMeter(model)
        with meter:
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
        opt.step()
        opt.zero_grad()
        assert meter.live_count == 0
        peaks.append(meter.peak_bytes)
    assert peaks[0] == peaks[1] == peaks[2]


def test_retain_graph_keeps_them_until_the_graph_dies():
    model = _model()
    meter = nt.SavedTensorMeter(model)
    with meter:
        loss = model(torch.randn(1, 1, 6, 6)).sum()
        loss.backward(retain_graph=True)
    assert meter.live_count > 0            # kept on purpose, for a second backward
    del loss
    gc.collect()
    assert meter.live_count == 0
