"""The simulator side of the adapter: forward and backward of conv2d and matmul as calls of the wrapping
layer (:mod:`npusim.ops`) on numpy arrays. No PyTorch in this module's arithmetic: every multiply-add of a
forward or a backward runs on the simulated core; the host only moves data around (transposes, zero
insertion, padding), as a framework's layout transforms would.

Dtypes: float16 computes in float16 (fp32 accumulation in L0C, one rounding to fp16 at the end); float32
in float32 (the conv2d kernels take fp32 on A2); float64 is computed in **float32** on the simulator and
returned as float64 (so gradcheck on float64 inputs sees fp32 rounding: see ``tests/torch``).

Which operator computes what:

==================  ============================================================================
forward conv        ``conv2d`` (bias and ReLU in the operator)
grad_input          ``conv2d`` of the stride-dilated, padded grad with the flipped, transposed
                    weights (stride 1, the forward's dilation): a transposed convolution
grad_weight         ``conv2d`` of the input with the grad as filters, batch and channels swapped (the
                    forward's stride and dilation exchanged), cropped to the kernel size
grad_bias           ``conv2d`` of the grad (batch and channels swapped) with one image-sized filter of
                    ones: the sum over images and pixels is the convolution's reduction
matmul, fp16        ``matmul`` (fp16 x fp16 -> fp32, rounded to fp16)
matmul, fp32        the Cube's fp32 path through ``conv2d`` with a 1x1 kernel: A (M x K) is read as an
                    image of K channels and M x 1 pixels, B^T as N filters of K x 1 x 1 (the matmul
                    kernel itself takes 16-bit inputs only); the longer of M and N is taken as
                    the pixels (C = (B^T A^T)^T when N > M): the layout transform then moves longer runs
==================  ============================================================================
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from .. import ops
from . import memo
from ..config import HardwareConfig, get_config
from ..profile import Profile

COMPUTE_DTYPES = {np.dtype(np.float16): np.dtype(np.float16), np.dtype(np.float32): np.dtype(np.float32),
                  np.dtype(np.float64): np.dtype(np.float32)}


# --- options and recording -----------------------------------------------------------------------
@dataclass
class Options:
    """What every simulated call of the adapter uses. ``config``: a preset name or HardwareConfig (None:
    the default ``a2``); ``sanitize``: ``"error"`` (default), ``"warn"`` or ``"off"``; ``variant``: the
    default conv2d variant of :class:`~npusim.torch.NPUConv2d`; ``cache``: the tiling cache (a training
    loop repeats its shapes, so after the first step every tiling is a hit); ``memo``: simulate each
    distinct convolution (shapes, dtypes, attributes, NPU, sanitizer) once and reuse its profiles, the
    values computed on the host with the simulator's arithmetic, bit for bit (:mod:`npusim.torch.memo`);
    False simulates every call."""

    config: HardwareConfig | str | None = None
    sanitize: str = "error"
    variant: str = "img2col"
    cache: ops.TilingCache = field(default_factory=lambda: ops.TilingCache(256))
    memo: bool = True

    @property
    def hardware(self) -> HardwareConfig:
        return get_config(self.config)


options = Options()


@dataclass
class Launch:
    """One simulated kernel launch: which adapter call made it (``role``, e.g. ``"conv2d.grad_input"``),
    the kernel (``kernel``: the operator's own kernel or a layout transform), its device time and Profile."""

    role: str
    op: str
    kernel: str
    device_us: float
    profile: Profile = field(repr=False)
    backward: bool = False


@dataclass
class Recording:
    """The launches made inside a :func:`record` block, plus the host time of tiling and of simulation."""

    launches: list[Launch] = field(default_factory=list)
    calls: int = 0
    tiling_s: float = 0.0
    cache_hits: int = 0
    host_s: float = 0.0

    @property
    def device_us(self) -> float:
        return sum(x.device_us for x in self.launches)

    def by_role(self) -> dict[str, float]:
        """Device microseconds per role, in order of first appearance."""
        out: dict[str, float] = {}
        for x in self.launches:
            out[x.role] = out.get(x.role, 0.0) + x.device_us
        return out

    def forward_us(self) -> float:
        return sum(x.device_us for x in self.launches if not x.backward)

    def backward_us(self) -> float:
        return sum(x.device_us for x in self.launches if x.backward)

    def slowest(self) -> Launch | None:
        return max(self.launches, key=lambda x: x.device_us, default=None)


_ACTIVE: list[Recording] = []


@contextlib.contextmanager
def record() -> Iterator[Recording]:
    """Collect every simulated launch made inside the block (forward and backward)::

        with npusim.torch.record() as rec:
            loss = model(x).sum(); loss.backward()
        rec.by_role()   # {'conv2d': 3.1, 'conv2d.grad_weight': 2.0, ...} device microseconds
    """
    rec = Recording()
    _ACTIVE.append(rec)
    try:
        yield rec
    finally:
        _ACTIVE.remove(rec)


def run(op: str, *inputs: np.ndarray | None, role: str, backward: bool = False, **attrs: Any) -> ops.OpResult:
    """Call operator ``op`` of the wrapping layer (both stages) with the adapter's options, and record it."""
    t0 = time.perf_counter()
    _, ex = ops.get_workspace_size(op, *inputs, config=options.config, cache=options.cache, **attrs)
    k = memo.key(ex, options.sanitize) if options.memo else None
    seen = memo.lookup(k)
    if seen is not None:   # simulated before: the same profiles, the values by the same arithmetic
        memo.stats["hits"] += 1
        res = memo.replay(ex, seen)
    else:
        res = ops.execute(ex, sanitize=options.sanitize)
        if k is not None:
            memo.stats["misses"] += 1
            memo.store(k, res.launches)
    spent = time.perf_counter() - t0
    for rec in _ACTIVE:
        rec.calls += 1
        rec.tiling_s += res.tiling_s
        rec.cache_hits += int(res.cache_hit)
        rec.host_s += spent
        rec.launches += [Launch(role, op, name, p.time_us, p, backward) for name, p in res.launches]
    return res


# --- shape inference without running ------------------------------------------------------------
def infer_shapes(op: str, *specs: tuple[Sequence[int], Any] | None, **attrs: Any) -> list[tuple[int, ...]]:
    """Output shapes of operator ``op`` for inputs given as ``(shape, dtype)`` (or None for an absent
    optional input): the operator's own validation and ``infer_shape``, with no data, no tiling and no
    launch. The placeholder arrays are zero-strided views of one element (no memory)."""
    opdef = ops.get(op)
    arrays = [None if s is None else np.broadcast_to(np.zeros((), np.dtype(s[1])), tuple(int(d) for d in s[0]))
              for s in specs]
    ctx, _ = opdef.validate(arrays, attrs, (), options.hardware)
    return [tuple(int(d) for d in s) for s in opdef.infer_shape_fn(ctx)]


def compute_dtype(dtype: Any) -> np.dtype:
    """The dtype the simulator computes in for tensors of ``dtype`` (float64 -> float32)."""
    d = np.dtype(dtype)
    try:
        return COMPUTE_DTYPES[d]
    except KeyError:
        raise ops.OpError(f"npusim.torch computes float16 and float32 (float64 as float32) on the simulated "
                          f"core, not {d.name}") from None


def _c(a: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=dtype if dtype is not None else compute_dtype(a.dtype))


# --- matmul --------------------------------------------------------------------------------------
def matmul(a: np.ndarray, b: np.ndarray, *, role: str = "matmul", backward: bool = False) -> np.ndarray:
    """``a @ b`` (2-D) on the simulator, in the compute dtype of ``a`` (see the module table)."""
    dt = compute_dtype(a.dtype)
    a, b = _c(a, dt), _c(b, dt)
    if dt == np.float16:
        c = run("matmul", a, b, role=role, backward=backward).out
        with np.errstate(over="ignore"):   # beyond fp16's range: inf, as the hardware's INF_NAN mode gives
            return c.astype(np.float16)
    if a.shape[1] != b.shape[0]:  # the conv2d route would give a less direct message
        infer_shapes("matmul", (a.shape, np.float16), (b.shape, np.float16))
    if a.shape[0] < b.shape[1]:   # C = (B^T A^T)^T: the longer side as pixels, longer DMA runs
        return np.ascontiguousarray(matmul(b.T, a.T, role=role, backward=backward).T)
    (m, k), (_, n) = a.shape, b.shape
    x = np.ascontiguousarray(a.T).reshape(1, k, m, 1)        # K channels, M x 1 pixels
    w = np.ascontiguousarray(b.T).reshape(n, k, 1, 1)        # N filters of K x 1 x 1
    y = run("conv2d", x, w, role=role, backward=backward, variant="img2col").out   # (1, N, M, 1)
    return np.ascontiguousarray(y[0, :, :, 0].T)


# --- conv2d --------------------------------------------------------------------------------------
def pair(v: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    v = tuple(int(i) for i in v)
    if len(v) == 1:
        return v[0], v[0]
    if len(v) != 2:
        raise ops.OpError(f"expected an int or a pair, got {v}")
    return v


def conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None, stride=1, padding=0, dilation=1,
           relu: bool = False, variant: str | None = None, *, role: str = "conv2d") -> np.ndarray:
    """The forward convolution (NCHW), bias and ReLU included, on the simulator."""
    dt = compute_dtype(x.dtype)
    b = None if bias is None else _c(bias, dt)
    return run("conv2d", _c(x, dt), _c(w, dt), b, role=role, stride=pair(stride), padding=pair(padding),
               dilation=pair(dilation), relu=bool(relu), variant=variant or options.variant).out


def conv_output_hw(hw, k_hw, stride, padding, dilation) -> tuple[int, int]:
    return tuple((h + 2 * p - d * (k - 1) - 1) // s + 1
                 for h, k, s, p, d in zip(hw, k_hw, pair(stride), pair(padding), pair(dilation)))


def grad_input_plan(grad_shape, w_shape, input_hw, stride, padding, dilation):
    """How ``conv2d_grad_input`` lays out its convolution: per axis, the zero insertion (stride) and the
    (top, bottom, left, right) padding of the grad (negative: crop), and the flipped weights' shape."""
    n, cout, ho, wo = grad_shape
    cout_w, cin, kh, kw = w_shape
    pads = []
    for size, out, k, s, p, d in zip(input_hw, (ho, wo), (kh, kw), pair(stride), pair(padding), pair(dilation)):
        before = d * (k - 1) - p
        extra = (size + 2 * p - d * (k - 1) - 1) - (out - 1) * s   # input rows the last window never reached
        pads += [before, before + extra]
    return tuple(pads), (cin, cout_w, kh, kw)


def dilate_pad(g: np.ndarray, stride, pads) -> np.ndarray:
    """Insert ``stride - 1`` zeros between the grad's rows and columns, then pad (or crop, where negative)
    by ``pads = (top, bottom, left, right)``: host-side data movement only."""
    sh, sw = pair(stride)
    n, c, ho, wo = g.shape
    hd, wd = (ho - 1) * sh + 1, (wo - 1) * sw + 1
    top, bottom, left, right = pads
    T, B, L, R = (max(0, v) for v in pads)
    out = np.zeros((n, c, hd + T + B, wd + L + R), g.dtype)
    out[:, :, T:T + hd:sh, L:L + wd:sw] = g
    return np.ascontiguousarray(out[:, :, max(0, -top):out.shape[2] - max(0, -bottom),
                                    max(0, -left):out.shape[3] - max(0, -right)])


def flip_weights(w: np.ndarray) -> np.ndarray:
    """(Cout, Cin, Kh, Kw) -> (Cin, Cout, Kh, Kw), each kernel rotated by 180 degrees."""
    return np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))


def conv2d_grad_input(grad: np.ndarray, w: np.ndarray, input_hw, stride=1, padding=0, dilation=1,
                      variant: str | None = None, *, role: str = "conv2d.grad_input") -> np.ndarray:
    """dL/dx of a convolution, as a convolution on the simulator: the grad with ``stride - 1`` zeros
    inserted between its pixels and padded by ``dilation*(k-1) - padding`` (plus the rows the forward's
    last window never reached), convolved (stride 1, same dilation) with the weights flipped in space and
    with Cin and Cout swapped. This is the transposed convolution a Conv2DBackpropInput kernel computes."""
    dt = compute_dtype(grad.dtype)
    pads, _ = grad_input_plan(grad.shape, w.shape, input_hw, stride, padding, dilation)
    g = dilate_pad(_c(grad, dt), stride, pads)
    out = run("conv2d", g, flip_weights(_c(w, dt)), role=role, backward=True, stride=(1, 1), padding=(0, 0),
              dilation=pair(dilation), relu=False, variant=variant or options.variant).out
    assert out.shape[2:] == tuple(input_hw), (out.shape, input_hw)
    return out


def grad_weight_plan(x_shape, grad_shape, k_hw, stride, padding, dilation) -> tuple[int, int]:
    """The (Kh', Kw') that ``conv2d_grad_weight``'s convolution produces (>= the kernel; cropped to it)."""
    return tuple((h + 2 * p - s * (o - 1) - 1) // d + 1
                 for h, o, s, p, d in zip(x_shape[2:], grad_shape[2:], pair(stride), pair(padding), pair(dilation)))


def conv2d_grad_weight(grad: np.ndarray, x: np.ndarray, k_hw, stride=1, padding=0, dilation=1,
                       variant: str | None = None, *, role: str = "conv2d.grad_weight") -> np.ndarray:
    """dL/dw of a convolution, as a convolution on the simulator with batch and channels swapped:
    ``dW[co, ci, i, j] = sum over n, oh, ow of grad[n, co, oh, ow] * x[n, ci, oh*s + i*d - p, ow*s + j*d - p]``
    is the convolution of x^T (Cin "images" of N channels) with grad^T (Cout filters of N x Ho x Wo),
    with the forward's stride and dilation exchanged and the same padding. The sum over every image and
    output pixel is the convolution's reduction: on the Cube, fp32 accumulation. The result (Cin, Cout,
    Kh', Kw') is cropped to the kernel size (the last rows only exist when the forward's last window
    stopped short of the padded input) and transposed to (Cout, Cin, Kh, Kw)."""
    dt = compute_dtype(grad.dtype)
    kh, kw = pair(k_hw)
    xt = np.ascontiguousarray(_c(x, dt).transpose(1, 0, 2, 3))
    gt = np.ascontiguousarray(_c(grad, dt).transpose(1, 0, 2, 3))
    out = run("conv2d", xt, gt, role=role, backward=True, stride=pair(dilation), padding=pair(padding),
              dilation=pair(stride), relu=False, variant=variant or options.variant).out
    return np.ascontiguousarray(out[:, :, :kh, :kw].transpose(1, 0, 2, 3))


def conv2d_grad_bias(grad: np.ndarray, variant: str | None = None, *, role: str = "conv2d.grad_bias") -> np.ndarray:
    """dL/db: the sum of the grad over images and pixels, as a convolution on the simulator: grad^T (Cout
    "images" of N channels, Ho x Wo) with one filter of ones as large as the image, so the whole sum is
    the convolution's reduction (exact ones, fp32 accumulation on the Cube)."""
    dt = compute_dtype(grad.dtype)
    n, cout, ho, wo = grad.shape
    gt = np.ascontiguousarray(_c(grad, dt).transpose(1, 0, 2, 3))
    out = run("conv2d", gt, np.ones((1, n, ho, wo), dt), role=role, backward=True, stride=(1, 1),
              padding=(0, 0), dilation=(1, 1), relu=False, variant=variant or options.variant).out
    return out.reshape(cout)
