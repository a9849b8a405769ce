"""Checks of lab 08 (into the framework), part 2: the learner's own ``torch.library`` operator matmul16
(real and fake implementation, autograd formula that keeps only fp16 copies and frees them), and the
learner's own verification of such an operator, which must reject broken ones (:mod:`.matmul16`).

PyTorch is imported inside each check, never at import time: ``npusim.checks`` loads without PyTorch.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np

from ..tracebacks import innermost_learner_site, is_unfinished
from ._core import CheckFailed, NotFinished, call_learner, case_rng, compare, describe, fixed_rng, passed
from ._flow import Skeleton
from .lab08_torch import _SETUP, _torch, simulated_macs

__all__ = ["custom_op", "verify_op"]

HINTS = {
    "custom-op": (
        "Section 2 shows the adapter's own operator in its three parts; matmul16 has the same three, plus "
        "the rule that autograd can only free what it was handed. What must each part do, and in which dtype?",
        "forward: the product on the simulator in float16, returned as float32. fake: no computing, only the "
        "output's shape and dtype, refusing what the real one refuses. setup_context: keep what backward "
        "needs where autograd can free it (which copies: the inputs, or what the forward multiplied?). "
        "backward: the two gradients of exercise 1, built from operators (which one?) so that opcheck and "
        "torch.compile can trace them.",
        Skeleton(
            "NS = nt.fresh_namespace()\n"
            "\n"
            "\n"
            "@torch.library.custom_op(f'{NS}::matmul16', mutates_args=())\n"
            "def matmul16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n"
            "    return torch.from_numpy(sim.matmul(___, ___)).float()\n"
            "\n"
            "\n"
            "@matmul16.register_fake\n"
            "def _(a, b):\n"
            "    torch._check(a.shape[1] == b.shape[0], lambda: f'matmul16: inner sizes differ: a is {tuple(a.shape)}, '\n"
            "                                                   f'b is {tuple(b.shape)}')\n"
            "    return a.new_empty(___, dtype=torch.float32)\n"
            "\n"
            "\n"
            "def setup_context(ctx, inputs, output):\n"
            "    a, b = inputs\n"
            "    ___\n"
            "\n"
            "\n"
            "def backward(ctx, grad):\n"
            "    a16, b16 = ctx.saved_tensors\n"
            "    return ___, ___\n"
            "\n"
            "\n"
            "matmul16.register_autograd(backward, setup_context=setup_context)\n",
            call="check.custom_op(matmul16)", setup=_SETUP),
    ),
    "verify-op": (
        "Each property has its tool: gradcheck for the backward's formula, opcheck for the registration and "
        "the fake implementation, and two small experiments of your own for accumulation and for what stays "
        "alive. Section 5 derived tolerances for float32; redo the reasoning for float16.",
        "gradcheck on float64 inputs, with a step and tolerances that float16's rounding allows (the op is "
        "linear in each input: what does that say about the step?). opcheck on one call. Accumulation: the "
        "gradient of each loss alone, then both forwards before both backwards, and compare a.grad with the "
        "sum. What stays alive: in an nt.SavedTensorMeter, what must the forward hold, and the backward "
        "leave? Raise (assert) when a property fails.",
        Skeleton(
            "def verify_op(op):\n"
            "    gen = torch.Generator().manual_seed(0)\n"
            "    a64 = torch.randn(4, 3, dtype=torch.float64, generator=gen, requires_grad=True)\n"
            "    b64 = torch.randn(3, 5, dtype=torch.float64, generator=gen, requires_grad=True)\n"
            "    torch.autograd.gradcheck(op, (a64, b64), eps=___, atol=___, rtol=___)\n"
            "    a, b1, b2 = (torch.randn(*s, generator=gen, requires_grad=True) for s in ((6, 5), (5, 4), (5, 4)))\n"
            "    w1, w2 = torch.randn(6, 4, generator=gen), torch.randn(6, 4, generator=gen)\n"
            "    torch.library.opcheck(op, (a, b1))\n"
            "    one_by_one = (torch.autograd.grad((op(a, b1) * w1).sum(), a)[0]\n"
            "                  + torch.autograd.grad((op(a, b2) * w2).sum(), a)[0])\n"
            "    ___                       # both forwards, then both backwards\n"
            "    assert torch.allclose(a.grad, one_by_one), 'the gradients of two losses do not add up in a.grad'\n"
            "    meter = nt.SavedTensorMeter()\n"
            "    with meter:\n"
            "        c = op(a, b1)\n"
            "        held = meter.live_count\n"
            "        c.sum().backward()\n"
            "    assert ___, f'{held} tensor(s) held during the forward, {meter.live_count} after the backward'\n",
            call="check.verify_op(verify_op)", setup=_SETUP),
    ),
}


# --- exercise 4: your own torch.library operator -------------------------------------------------------
_SHAPES = [(1, 1, 1), (33, 17, 20), (2, 40, 64)]   # (m, k, n); opcheck adds 6x5 @ 5x4


def _cases() -> list[tuple[int, int, int]]:
    rng = case_rng("custom_op", "random")
    return list(_SHAPES) + [tuple(int(v) for v in rng.integers(1, 48, 3))]


def _tensors_on(obj: Any, depth: int = 0) -> bool:
    """Whether ``obj`` is or holds (in tuples, lists, dicts) a tensor."""
    import torch
    if isinstance(obj, torch.Tensor):
        return True
    if depth < 3 and isinstance(obj, (tuple, list)):
        return any(_tensors_on(v, depth + 1) for v in obj)
    if depth < 3 and isinstance(obj, dict):
        return any(_tensors_on(v, depth + 1) for v in obj.values())
    return False


def _is_custom_op(torch, op) -> bool:
    return isinstance(op, (torch._library.custom_ops.CustomOpDef, torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def _fake_contract(check: str, torch, op) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        for dtype in (torch.float32, torch.float64):
            try:
                out = op(torch.empty(7, 3, dtype=dtype), torch.empty(3, 5, dtype=dtype))
            except Exception as e:  # noqa: BLE001 - the learner's fake implementation
                raise CheckFailed(check, f"your fake implementation failed on a (7, 3) @ (3, 5) call of {dtype} "
                                         f"tensors: {type(e).__name__}: {e}") from None
            if tuple(out.shape) != (7, 5) or out.dtype != torch.float32:
                raise CheckFailed(check, f"under FakeTensorMode, a (7, 3) @ (3, 5) call of {dtype} tensors gives "
                                         f"{out.dtype} {tuple(out.shape)}; the real one gives torch.float32 (7, 5) "
                                         f"whatever the inputs' dtype: the fake implementation must promise "
                                         f"exactly what the real one returns")
        try:
            op(torch.empty(3, 4), torch.empty(5, 2))
        except Exception:  # noqa: BLE001 - any refusal will do
            return
    raise CheckFailed(check, "your fake implementation accepts a (3, 4) @ (5, 2) call, which the real one refuses: "
                             "a compiler would trace a model that fails when it runs. Refuse it "
                             "(torch._check(a.shape[1] == b.shape[0], ...))")


def custom_op(op) -> None:
    """Lab 08, exercise 4: ``op`` (registered with ``torch.library.custom_op``) computes ``a @ b`` in float16
    on the simulator and returns float32; its fake implementation agrees with it and refuses what it
    refuses; its autograd formula saves only the fp16 copies with ``ctx.save_for_backward`` (nothing on
    ctx), runs on the simulator, releases everything after backward, and its gradients accumulate over two
    uses; ``torch.library.opcheck`` passes. On hidden shapes from 1x1x1 to 33x17x20."""
    __tracebackhide__ = True
    name = "custom_op"
    torch = _torch(name)
    from ..torch import kernels as sim
    if not _is_custom_op(torch, op):
        raise CheckFailed(name, f"pass your operator, the function decorated with @torch.library.custom_op "
                                f"(got {type(op).__name__})")
    if getattr(op, "_backward_fn", "") is None:
        raise CheckFailed(name, "your operator has no autograd formula: register backward and setup_context with "
                                "op.register_autograd(backward, setup_context=setup_context)")
    for i, (m, k, n) in enumerate(_cases()):
        case = {"a": f"{m}x{k}", "b": f"{k}x{n}", "a used": "twice"}
        rng = fixed_rng(name, i) if i < len(_SHAPES) else case_rng(name, i)
        gen = torch.Generator().manual_seed(int(rng.integers(1 << 31)))
        a = torch.randn(m, k, generator=gen, requires_grad=True)
        b1, b2 = (torch.randn(k, n, generator=gen, requires_grad=True) for _ in range(2))
        g1, g2 = (torch.randn(m, n, generator=gen) for _ in range(2))
        keep = {id(t) for t in (a, b1, b2)}
        saved: list[tuple[str, tuple, weakref.ref | None]] = []

        def pack(t):
            saved.append((str(t.dtype).replace("torch.", ""), tuple(t.shape),
                          None if id(t) in keep else weakref.ref(t)))
            return t

        with sim.record() as fwd, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            c1 = call_learner(name, op, a, b1, case=case, what="your forward")
            c2 = call_learner(name, op, a, b2, case=case, what="your forward")
        for c in (c1, c2):
            if not isinstance(c, torch.Tensor) or tuple(c.shape) != (m, n) or c.dtype != torch.float32:
                got = f"{c.dtype} {tuple(c.shape)}" if isinstance(c, torch.Tensor) else type(c).__name__
                raise CheckFailed(name, f"on [{describe(case)}] the forward returned {got}; expected a "
                                        f"torch.float32 tensor of shape ({m}, {n})")
            if c.grad_fn is None:
                raise CheckFailed(name, f"on [{describe(case)}] the output has no grad_fn: autograd cannot "
                                        f"differentiate your operator. Register its backward with "
                                        f"op.register_autograd(backward, setup_context=...)")
        launched = {x.op for x in fwd.launches}
        if not fwd.launches:
            raise CheckFailed(name, f"on [{describe(case)}] the forward ran nothing on the simulator: compute it "
                                    f"with sim.matmul")
        if simulated_macs(fwd) < 2 * m * k * n:
            raise CheckFailed(name, f"on [{describe(case)}] the two forwards did {simulated_macs(fwd):,} "
                                    f"multiply-adds on the simulator; {m}x{k} @ {k}x{n} twice needs "
                                    f"{2 * m * k * n:,}: compute the product itself with sim.matmul, not on the host")
        if "matmul" not in launched:
            raise CheckFailed(name, f"on [{describe(case)}] the simulator computed in float32 (it launched "
                                    f"{sorted(launched)}, its float32 route): cast a and b to float16 before "
                                    f"sim.matmul")
        a16, b16s = a.detach().half().double(), [b.detach().half().double() for b in (b1, b2)]
        for c, b16 in zip((c1, c2), b16s):
            compare(name, c.detach().numpy(), (a16 @ b16).numpy(), case, rtol=2e-3, atol=2e-3 * k ** 0.5,
                    look_at="the forward: a @ b with both cast to float16, returned as float32")
        stored = sorted({k for c in (c1, c2) for k, v in vars(c.grad_fn).items() if _tensors_on(v)})
        if stored:
            raise CheckFailed(name, f"tensors are kept as ctx attributes ({', '.join('ctx.' + s for s in stored)}): "
                                    f"autograd never sees them, so it cannot free them after backward; they live "
                                    f"as long as the graph. Hand them to ctx.save_for_backward(...) and read them "
                                    f"back with ctx.saved_tensors")
        if not saved:
            raise CheckFailed(name, f"on [{describe(case)}] nothing was saved for backward (ctx.save_for_backward), "
                                    f"so backward cannot have a and b")
        wide = sorted({f"{dt} {shape}" for dt, shape, _ in saved if dt != "float16"})
        if wide:
            raise CheckFailed(name, f"on [{describe(case)}] you save {', '.join(wide)} for backward: backward "
                                    f"computes with the float16 copies, so save those (half the bytes of "
                                    f"float32, and no second cast in backward)")
        gc.collect()
        gc.disable()
        try:
            with sim.record() as bwd:
                call_learner(name, lambda: (c1 * g1).sum().backward(), case=case, what="your backward")
                call_learner(name, lambda: (c2 * g2).sum().backward(), case=case, what="your backward")
            alive = [f"{dt} {shape}" for dt, shape, ref in saved if ref is not None and ref() is not None]
        finally:
            gc.enable()
        if alive:
            raise CheckFailed(name, f"on [{describe(case)}] after backward, {len(alive)} tensor(s) saved for it are "
                                    f"still alive ({', '.join(alive)}): something besides autograd keeps them (a "
                                    f"global, a list, a closure?). Keep them with ctx.save_for_backward only")
        if "matmul" not in {x.op for x in bwd.launches} or simulated_macs(bwd) < 4 * m * k * n:
            raise CheckFailed(name, f"on [{describe(case)}] the two backwards ran {bwd.calls} simulated call(s) "
                                    f"({sorted({x.op for x in bwd.launches})}) doing {simulated_macs(bwd):,} "
                                    f"multiply-adds; dA and dB of both calls need {4 * m * k * n:,}: compute both "
                                    f"gradients on the "
                                    f"simulator in float16, with your matmul16")
        g16 = [g.half().double() for g in (g1, g2)]
        want_a = g16[0] @ b16s[0].T + g16[1] @ b16s[1].T
        last_copies = (g16[0] + g16[1]) @ b16s[1].T   # both backwards read the second call's copies
        for label, got, want in (("a.grad (two uses, accumulated)", a.grad, want_a),
                                 ("b1.grad", b1.grad, a16.T @ g16[0])):
            if got is None:
                raise CheckFailed(name, f"on [{describe(case)}] {label} is None: backward must return one "
                                        f"gradient per input")
            if got.dtype != torch.float32:
                raise CheckFailed(name, f"on [{describe(case)}] {label} is {got.dtype}, expected torch.float32")
            why = ("The first backward used the second call's tensors: whatever backward reads must come from "
                   "its own ctx (ctx.saved_tensors), not from state the next call overwrites."
                   if label.startswith("a.grad") and np.allclose(got.numpy(), last_copies.numpy(), rtol=1e-2,
                                                                 atol=1e-2 * k ** 0.5) else
                   "Look at the backward: dA = dC @ B^T, dB = A^T @ dC, from the saved fp16 copies.")
            compare(name, got.numpy(), want.numpy(), {**case, "gradient": label}, rtol=4e-3,
                    atol=4e-3 * max(m, n) ** 0.5, causes=why)
    _fake_contract(name, torch, op)
    a = torch.randn(6, 5, requires_grad=True)
    b = torch.randn(5, 4, requires_grad=True)
    try:
        torch.library.opcheck(op, (a, b))
    except Exception as e:  # noqa: BLE001 - OpCheckError, or what the learner's code raised inside it
        why = (" The traced backward met numpy: FakeTensors have no data, so the backward must be made of "
               "operators (matmul16 itself), not of numpy calls" if "numpy" in str(e) else "")
        raise CheckFailed(name, f"torch.library.opcheck(op, (a 6x5, b 5x4)) failed: "
                                f"{str(e).splitlines()[0][:300]}{why}") from None
    passed(name, f"{len(_cases())} hidden shapes: float16 on the simulator, fake implementation, fp16 copies saved "
                 f"and released, gradients accumulated over two uses, opcheck")


# --- exercise 5: your own verification -----------------------------------------------------------------
def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def verify_op(verify) -> None:
    """Lab 08, exercise 5: ``verify(op)`` returns for a correct fp16 matmul operator and raises (an
    AssertionError or a tool's error) for each hidden broken one: a backward that ignores its incoming
    gradient, a wrong fake implementation, saved copies shared between calls, tensors kept on ctx."""
    __tracebackhide__ = True
    name = "verify_op"
    _torch(name)
    from . import matmul16

    def run(variant: str):
        try:
            return verify(matmul16.get(variant)) is False, None
        except NotImplementedError as e:
            if is_unfinished(e):
                raise NotFinished(name, f"not finished yet: {str(e).strip() or 'verify_op'}") from None
            return True, e
        except Exception as e:  # noqa: BLE001 - any error is a rejection
            return True, e

    matmul16.reset_log()
    rejected, err = run("good")
    if rejected:
        where = innermost_learner_site(err.__traceback__) if err is not None else ""
        raise CheckFailed(name, f"your verify_op rejected a correct float16 operator"
                                + (f" with {_first_line(err)}" if err is not None else " (it returned False)")
                                + (f" at {where}" if where else "") + ". Is a tolerance tighter than float16 "
                                "can meet (section 5's reasoning, with float16's 2^-11)?")
    if not matmul16.interleaved_uses():
        raise CheckFailed(name, "your verify_op never checks that gradients accumulate over two losses: it never "
                                "runs two forwards of op that share an input and then the backward of both. Make "
                                "two losses from two calls, backward each, and compare a.grad with the sum of the "
                                "two gradients taken one loss at a time")
    accepted = [v for v in matmul16.BROKEN if not run(v)[0]]
    if accepted:
        what, tool = matmul16.BROKEN[accepted[0]]
        tail = (" It accepted every broken operator: does verify_op test op, its argument?"
                if len(accepted) == len(matmul16.BROKEN) else
                f" ({len(accepted)} of the {len(matmul16.BROKEN)} broken operators passed.)")
        raise CheckFailed(name, f"your verify_op accepted an operator whose {what}. To catch it: {tool}.{tail}")
    passed(name, f"passes a correct operator and rejects all {len(matmul16.BROKEN)} broken ones (backward ignoring "
                 f"its gradient, wrong fake, state shared between calls, tensors kept on ctx)")
