"""Gradients of the simulated conv2d / matmul / linear against PyTorch's own, gradcheck, accumulation."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import npusim.torch as nt  # noqa: E402
from torch_helpers import assert_close, torch_conv_grads  # noqa: E402

pytestmark = pytest.mark.lab08
SETTINGS = settings(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [torch.float32, torch.float16]


@st.composite
def conv_cases(draw):
    """Small convolutions: batch 1-2, channels 1-8, H/W 3-8, kernel 1-3, stride 1-2, padding 0-1."""
    n, cin, cout = draw(st.integers(1, 2)), draw(st.integers(1, 8)), draw(st.integers(1, 8))
    h, w = draw(st.integers(3, 8)), draw(st.integers(3, 8))
    k = draw(st.integers(1, 3))
    kh, kw = k, draw(st.sampled_from([k, max(1, k - 1)]))
    stride, padding = draw(st.integers(1, 2)), draw(st.integers(0, 1))
    dilation = draw(st.sampled_from([1, 1, 2]))
    if min(h + 2 * padding - dilation * (kh - 1), w + 2 * padding - dilation * (kw - 1)) < 1:
        dilation = 1
    return dict(n=n, cin=cin, cout=cout, h=h, w=w, kh=kh, kw=kw, stride=stride, padding=padding,
                dilation=dilation, bias=draw(st.booleans()), relu=draw(st.booleans()), seed=draw(st.integers(0, 99)))


def _conv_inputs(c, dtype):
    gen = torch.Generator().manual_seed(c["seed"])
    x = torch.randn(c["n"], c["cin"], c["h"], c["w"], generator=gen).to(dtype)
    w = torch.randn(c["cout"], c["cin"], c["kh"], c["kw"], generator=gen).to(dtype)
    b = torch.randn(c["cout"], generator=gen).to(dtype) if c["bias"] else None
    return gen, x, w, b


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@given(c=conv_cases())
@settings(SETTINGS, max_examples=30)
def test_conv2d_gradients_match_torch(dtype, c):
    gen, x, w, b = _conv_inputs(c, dtype)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    bs = None if b is None else b.clone().requires_grad_()
    y = nt.conv2d(xs, ws, bs, c["stride"], c["padding"], c["dilation"], relu=c["relu"])
    g = torch.randn(y.shape, generator=gen).to(dtype)
    y.backward(g)
    ref = torch_conv_grads(x, w, b, g, c["stride"], c["padding"], c["dilation"], c["relu"])
    assert y.dtype == xs.grad.dtype == ws.grad.dtype == dtype
    for name, got, want in zip(("y", "grad_input", "grad_weight", "grad_bias"), (y, xs.grad, ws.grad, None if bs is None else bs.grad), ref):
        if want is not None:
            assert_close(name, got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40), seed=st.integers(0, 99))
@settings(SETTINGS, max_examples=10)
def test_matmul_gradients_match_torch(dtype, m, k, n, seed):
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)
    g = torch.randn(m, n, generator=gen).to(dtype)
    a_s, b_s = a.clone().requires_grad_(), b.clone().requires_grad_()
    c = nt.matmul(a_s, b_s)
    c.backward(g)
    a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
    (a64 @ b64).backward(g.double())
    for name, got, want in (("c", c, a.double() @ b.double()), ("grad_a", a_s.grad, a64.grad),
                            ("grad_b", b_s.grad, b64.grad)):
        assert_close(name, got, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16"])
def test_linear_with_folded_bias_matches_torch(dtype):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 5, generator=gen).to(dtype)
    lin = torch.nn.Linear(5, 4).to(dtype)
    npu = nt.NPULinear.from_torch(lin)
    y = npu(x.clone().requires_grad_())
    g = torch.randn(y.shape, generator=gen).to(dtype)
    y.backward(g)
    x64 = x.double().requires_grad_()
    ref_lin = torch.nn.Linear(5, 4).double()
    ref_lin.load_state_dict(lin.state_dict())
    y64 = ref_lin(x64)
    y64.backward(g.double())
    assert_close("y", y, y64, dtype)
    assert_close("grad_weight", npu.weight.grad, ref_lin.weight.grad, dtype)
    assert_close("grad_bias", npu.bias.grad, ref_lin.bias.grad, dtype)


# --- gradcheck -------------------------------------------------------------------------------------
# float64 inputs are computed in float32 on the simulator, so the function gradcheck differentiates
# numerically carries fp32 rounding (~6e-8 x |y|). A central difference divides it by 2*eps: with the
# default eps=1e-6 that is an error of ~0.3 x |y|, hopeless; with eps=1e-3 it is ~1e-4 x |y| (|y| < 10
# here), so atol=rtol=1e-3 passes with a margin of a few times while still catching any wrong formula
# (those give O(1) errors). eps must also stay small enough not to cross ReLU's kink: 1e-2 fails.
GRADCHECK = dict(eps=1e-3, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("stride,padding,dilation,relu", [(1, 1, 1, False), (2, 1, 1, True), (1, 0, 2, False)])
def test_conv2d_gradcheck(stride, padding, dilation, relu):
    gen = torch.Generator().manual_seed(stride * 10 + padding)
    x = torch.randn(1, 2, 5, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)
    fn = lambda x, w, b: nt.conv2d(x, w, b, stride, padding, dilation, relu=relu)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w, b), **GRADCHECK)


def test_matmul_and_linear_gradcheck():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(nt.matmul, (a, b), **GRADCHECK)
    w = torch.randn(5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(5, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(nt.linear, (a, w, bias), **GRADCHECK)


def test_default_gradcheck_settings_fail_for_the_documented_reason():
    """eps=1e-6 differentiates fp32 rounding noise: the check must fail (so our settings are needed)."""
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    assert not torch.autograd.gradcheck(nt.matmul, (a, b), raise_exception=False)


def test_fp16_gradients_against_torch_fp32():
    """fp16 on the simulator is as close to an fp32 computation as fp16 storage allows."""
    gen = torch.Generator().manual_seed(4)
    x, w = torch.randn(2, 3, 6, 6, generator=gen), torch.randn(4, 3, 3, 3, generator=gen)
    xh, wh = x.half().requires_grad_(), w.half().requires_grad_()
    y = nt.conv2d(xh, wh, padding=1)
    y.float().square().sum().backward()
    xf, wf = x.half().float().requires_grad_(), w.half().float().requires_grad_()
    torch.nn.functional.conv2d(xf, wf, padding=1).square().sum().backward()
    assert_close("grad_input", xh.grad, xf.grad, torch.float16)
    assert_close("grad_weight", wh.grad, wf.grad, torch.float16)


# --- accumulation ------------------------------------------------------------------------------------
def test_gradients_accumulate_over_two_losses_and_two_uses():
    gen = torch.Generator().manual_seed(5)
    x1, x2 = torch.randn(1, 2, 5, 5, generator=gen), torch.randn(2, 2, 4, 6, generator=gen)
    w0, b0 = torch.randn(3, 2, 3, 3, generator=gen), torch.randn(3, generator=gen)
    # simulator: w and b feed two losses, backward separately (accumulation in .grad), and x1's conv
    # output feeds the second loss through a second use of w within one graph
    w, b = w0.clone().requires_grad_(), b0.clone().requires_grad_()
    nt.conv2d(x1, w, b, padding=1).sum().backward()
    y2 = nt.conv2d(x2, w, b, padding=1, relu=True)
    (y2.square().mean() + nt.conv2d(x1, w, None, padding=1).abs().sum()).backward()
    # PyTorch
    wr, br = w0.double().requires_grad_(), b0.double().requires_grad_()
    F = torch.nn.functional
    F.conv2d(x1.double(), wr, br, padding=1).sum().backward()
    y2r = F.relu(F.conv2d(x2.double(), wr, br, padding=1))
    (y2r.square().mean() + F.conv2d(x1.double(), wr, None, padding=1).abs().sum()).backward()
    assert_close("accumulated grad_weight", w.grad, wr.grad, torch.float32)
    assert_close("accumulated grad_bias", b.grad, br.grad, torch.float32)


def test_backward_records_simulated_launches():
    x = torch.randn(1, 2, 5, 5)
    w, b = torch.randn(3, 2, 3, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    with nt.record() as rec:
        nt.conv2d(x.requires_grad_(), w, b, padding=1, relu=True).sum().backward()
    roles = rec.by_role()
    assert set(roles) == {"conv2d", "conv2d.grad_input", "conv2d.grad_weight", "conv2d.grad_bias"}, roles
    assert rec.backward_us() > 0 and rec.forward_us() > 0
    assert all(x.backward == (x.role != "conv2d") for x in rec.launches)
