"""Lab 08's operator ``matmul16``: ``a @ b`` computed in float16 on the simulated Cube and returned as
float32, registered with ``torch.library`` (real implementation, fake implementation, autograd formula
saving the fp16 copies). The checks use the correct one, and feed a learner's ``verify_op`` broken
variants that it must reject. Each is registered once per process, under the namespace ``lab08_check`` and a random name.
PyTorch is imported here: import this module only where PyTorch is needed."""

from __future__ import annotations

import itertools
import secrets
import weakref

import torch
from torch import Tensor

from ..torch import kernels as sim

# variant -> (what is wrong with it, which verification catches it)
BROKEN = {
    "grad_ignored": ("backward ignores the incoming gradient (it computes as if every dL/dc were 1)",
                     "torch.autograd.gradcheck compares the backward with finite differences for every output "
                     "(a test with the loss c.sum() alone cannot see it)"),
    "bad_fake": ("fake implementation gives the transposed shape (n, m)",
                 "torch.library.opcheck compares the fake implementation with the real one"),
    "shared_state": ("backward reads its fp16 copies from a global that the next call overwrites",
                     "gradcheck (its finite differences run forwards between the forward and its backward) or "
                     "two losses: run two forwards, then both backwards, and compare a.grad with the sum of "
                     "the two gradients taken one loss at a time"),
    "ctx_attr": ("fp16 copies are kept as a ctx attribute (ctx.saved = (a16, b16)), where autograd never frees "
                 "them", "during the forward, nt.SavedTensorMeter must hold the tensors backward needs; here it "
                 "holds none (they bypass autograd), and they live as long as the graph"),
}
_OPS: dict[str, object] = {}
_STATE: dict[str, tuple] = {}
# the correct op's calls: graph nodes alive (id -> ids of their inputs), nodes that got their backward, and
# pairs of nodes sharing an input where the second was made before the first's backward
_LOG: dict = {"alive": {}, "back": set(), "pairs": []}
_SERIAL = itertools.count()


def _log_forward(ctx, inputs) -> None:
    me, ids = next(_SERIAL), {id(t) for t in inputs}   # a serial, not id(ctx): ids of freed nodes come back
    ctx.lab08_serial = me
    _LOG["pairs"] += [(other, me) for other, used in _LOG["alive"].items()
                      if used & ids and other not in _LOG["back"]]
    _LOG["alive"][me] = ids
    weakref.finalize(ctx, _LOG["alive"].pop, me, None)


def reset_log() -> None:
    _LOG["back"].clear()
    _LOG["pairs"].clear()


def interleaved_uses() -> int:
    """Since :func:`reset_log`: how often two calls of the correct op that share an input both got their
    backward after both forwards ran (the two-losses experiment), as a gradient accumulation test does."""
    return sum(1 for a, b in _LOG["pairs"] if a in _LOG["back"] and b in _LOG["back"])


def _register(variant: str):
    # an opaque name per process: a verify_op must judge what the operator does, not what it is called
    @torch.library.custom_op(f"lab08_check::matmul16_{secrets.token_hex(4)}", mutates_args=())
    def op(a: Tensor, b: Tensor) -> Tensor:
        return torch.from_numpy(sim.matmul(a.detach().half().numpy(), b.detach().half().numpy())).float()

    @op.register_fake
    def _(a, b):
        torch._check(a.shape[1] == b.shape[0], lambda: f"inner sizes differ: a is {tuple(a.shape)}, b is "
                                                       f"{tuple(b.shape)}")
        shape = (b.shape[1], a.shape[0]) if variant == "bad_fake" else (a.shape[0], b.shape[1])
        return a.new_empty(shape, dtype=torch.float32)

    def setup_context(ctx, inputs, output):
        if variant == "good":
            _log_forward(ctx, inputs)
        a16, b16 = inputs[0].half(), inputs[1].half()
        if variant == "ctx_attr":
            ctx.saved = (a16, b16)
            return
        ctx.save_for_backward(a16, b16)
        if variant == "shared_state":
            _STATE["ab"] = (a16, b16)

    def backward(ctx, grad):
        if variant == "good":
            _LOG["back"].add(ctx.lab08_serial)
        if variant == "ctx_attr":
            a16, b16 = ctx.saved
        elif variant == "shared_state":
            a16, b16 = _STATE["ab"]
        else:
            a16, b16 = ctx.saved_tensors
        if variant == "grad_ignored":
            grad = torch.ones_like(grad)
        return op(grad, b16.t()), op(a16.t(), grad)

    op.register_autograd(backward, setup_context=setup_context)
    return op


def get(variant: str = "good"):
    """The correct matmul16 (``"good"``) or one of the :data:`BROKEN` variants."""
    if variant != "good" and variant not in BROKEN:
        raise KeyError(f"no matmul16 variant {variant!r}; there are 'good' and {sorted(BROKEN)}")
    if variant not in _OPS:
        _OPS[variant] = _register(variant)
    return _OPS[variant]
