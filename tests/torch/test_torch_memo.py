"""The adapter's memo (npusim.torch.memo): a reused convolution has exactly the simulated timing and, bit
for bit, the simulated values (inf, NaN and signed zeros included), and training through it changes
nothing but the host time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import npusim as ns  # noqa: E402
import npusim.torch as nt  # noqa: E402
from npusim import ops  # noqa: E402
from npusim.conv import api  # noqa: E402
from npusim.torch import memo, training  # noqa: E402

pytestmark = pytest.mark.slow

# x shape, w shape, bias, stride, padding, dilation, relu: the lab's layers and backward convolutions
# (grad_weight: a batch-sized kernel; grad_bias: an image-sized one; matmul as a 1x1 conv), strides,
# dilations, a padding so large that some bands of output rows read only padding rows, and Cin > C0
CASES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), False, 1, 1, 1, True),
    ((16, 4, 8, 8), (8, 4, 3, 3), True, 1, 1, 1, True),
    ((1, 2, 5, 5), (3, 2, 3, 3), True, 2, 1, 1, True),
    ((4, 16, 16, 16), (4, 16, 16, 16), False, 1, 1, 1, False),
    ((8, 16, 8, 8), (1, 16, 8, 8), False, 1, 0, 1, False),
    ((1, 9, 16, 1), (3, 9, 1, 1), False, 1, 0, 1, False),
    ((2, 3, 7, 6), (4, 3, 3, 3), False, 2, 1, 2, False),
    ((1, 20, 9, 9), (18, 20, 3, 3), True, 1, 2, 2, True),
    ((1, 3, 4, 4), (2, 3, 3, 3), True, 1, 4, 1, True),
]
DTYPES = [np.float32, np.float16]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _inputs(case, dtype, special: bool, seed: int = 0):
    xs, ws, bias, *_ = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    if special:   # an inf spreads NaN through the Cube's transposes (0 * inf); zeros of both signs
        x.flat[rng.choice(x.size, 3, replace=False)] = [np.inf, -0.0, 0.0]
        w.flat[0] = -0.0
    return x, w, b


def _prepared(case, x, w, b):
    _, _, _, s, p, d, relu = case
    _, ex = ops.get_workspace_size("conv2d", x, w, b, stride=(s, s), padding=(p, p), dilation=(d, d), relu=relu,
                                   variant="img2col")
    return ex


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("special", [False, True], ids=["finite", "inf-and-zeros"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x{}-w{}".format(*("x".join(map(str, s)) for s in c[:2])))
def test_replayed_values_are_the_simulated_bits(case, dtype, special):
    x, w, b = _inputs(case, dtype, special)
    ex = _prepared(case, x, w, b)
    assert memo.key(ex, "error") is not None, "the lab's convolutions are memoised"
    simulated = ops.execute(ex).out.copy()
    t = ex.tiling
    host = memo.conv2d_img2col(x, w, b, t.geometry, t.conv, relu=t.epilogue.relu)
    assert host.dtype == simulated.dtype and host.shape == simulated.shape
    differ = np.flatnonzero(_bits(host) != _bits(simulated))
    assert differ.size == 0, (f"{differ.size} of {host.size} values differ from the simulation, e.g. at "
                              f"{differ[:3]}: host {host.flat[differ[:3]]}, simulated {simulated.flat[differ[:3]]}")
    if special:
        assert np.isnan(simulated).any(), "the inf input should have made NaNs (0 * inf in a transpose)"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_replay_follows_the_tilings_k_steps_and_cin_blocks(dtype):
    """Tilings that split K into several steps and Cin into several blocks (each its own rounding of the
    fp32 accumulator), or the output into many small tiles and Cout groups, give the same bits on the
    host as in the simulation."""
    case = ((2, 40, 6, 6), (20, 40, 3, 3), True, 1, 1, 1, False)
    x, w, b = _inputs(case, dtype, special=False, seed=3)
    ex = _prepared(case, x, w, b)
    g, t0 = ex.tiling.geometry, ex.tiling.conv
    c0 = g.c0
    # the chip's staged tiling keeps every input channel in one block: Cin blocks need the plain img2col
    plain = dataclasses.replace(t0, staged=False)
    for tiling in (dataclasses.replace(t0, k_tile=c0), dataclasses.replace(plain, cin_block=c0, k_tile=2 * c0),
                   dataclasses.replace(plain, cin_block=3 * c0, k_tile=5 * c0),
                   dataclasses.replace(t0, rows=1, m_tile=16, cout_block=16, cout_split=2)):
        sim = api.run_img2col(x, w, b, 1, 1, 1, tiling=tiling, block_dim=4).output
        host = memo.conv2d_img2col(x, w, b, g, tiling, relu=False)
        assert np.array_equal(_bits(host), _bits(sim)), f"{tiling}: the host replay differs from the simulation"


@pytest.fixture
def fresh_memo():
    memo.clear()
    nt.options.memo = True
    yield
    nt.options.memo = True
    memo.clear()


def _launch_facts(launches):
    return [(name, p.total_cycles, dict(p.pipe_busy_cycles), dict(p.path_bytes), p.cube_macs, p.l2_hit_bytes,
             p.l2_miss_bytes, p.block_dim) for name, p in launches]


def test_a_memoised_timing_is_the_fresh_simulation(fresh_memo):
    """Call 2 (other values, same shapes) reuses call 1's launches; simulating call 2 afresh gives the
    same profiles and the same values."""
    torch.manual_seed(0)
    x1, x2 = torch.randn(16, 4, 8, 8), torch.randn(16, 4, 8, 8)
    w, bias = torch.randn(8, 4, 3, 3), torch.randn(8)
    with nt.record() as first:
        nt.conv2d(x1, w, bias, padding=1, relu=True)
    with nt.record() as reused:
        y_reused = nt.conv2d(x2, w, bias, padding=1, relu=True)
    assert memo.stats == {"hits": 1, "misses": 1}
    nt.options.memo = False
    with nt.record() as fresh:
        y_fresh = nt.conv2d(x2, w, bias, padding=1, relu=True)
    assert memo.stats == {"hits": 1, "misses": 1}, "memo=False must simulate"
    assert [x.kernel for x in reused.launches] == [x.kernel for x in fresh.launches] == \
        ["nchw_to_nc1hwc0", "conv2d", "nhwc_to_nchw"]
    assert _launch_facts((x.kernel, x.profile) for x in reused.launches) == \
        _launch_facts((x.kernel, x.profile) for x in fresh.launches)
    assert reused.device_us == fresh.device_us == first.device_us
    assert torch.equal(y_reused, y_fresh)


def test_what_the_key_tells_apart(fresh_memo):
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    nt.conv2d(x, w, padding=1)
    nt.conv2d(x, w, padding=1)
    assert memo.stats["hits"] == 1
    for call in (lambda: nt.conv2d(x, w, padding=2), lambda: nt.conv2d(x, w, padding=1, relu=True),
                 lambda: nt.conv2d(x.half(), w.half(), padding=1), lambda: nt.conv2d(x[:1], w, padding=1)):
        call()
    assert memo.stats == {"hits": 1, "misses": 5}, "another padding, epilogue, dtype or shape is simulated"
    old = nt.options.sanitize
    try:
        nt.options.sanitize = "warn"
        nt.conv2d(x, w, padding=1)
    finally:
        nt.options.sanitize = old
    assert memo.stats["misses"] == 6, "the sanitizer mode is part of the key"
    with ns.shared_l2():
        nt.conv2d(x, w, padding=1)
    assert memo.stats == {"hits": 1, "misses": 6}, "a warm L2 is a state the key cannot name: simulated"
    nt.conv2d(x, w, padding=1, variant="layout")
    assert memo.stats == {"hits": 1, "misses": 6}, "only img2col is replayed"


def test_training_through_the_memo_changes_nothing_but_host_time(fresh_memo):
    """fp32, and fp16 at a loss scale that overflows (inf gradients, skipped steps): the same losses,
    skips, flushed shares, device times and weights with and without the memo."""
    x, y = training.shapes_dataset(48, seed=0)
    runs = {}
    for flag in (False, True):
        nt.options.memo = flag
        memo.clear()
        runs[flag] = []
        for dtype, scale in ((None, 1.0), (torch.float16, 2.0 ** 20)):
            model = nt.swap_modules(training.tiny_cnn(seed=0), compute_dtype=dtype)
            r = training.train(model, x, y, steps=3, batch=8, loss_scale=scale)
            runs[flag].append((r.losses, r.skipped, r.flushed, r.device_us,
                               [p.detach().clone() for p in model.parameters()]))
    assert memo.stats["hits"] > 0
    assert any(runs[True][1][1]), "the 2^20 run should skip a step (an inf gradient)"
    for off, on in zip(runs[False], runs[True]):
        assert off[:4] == on[:4]
        assert all(torch.equal(p, q) for p, q in zip(off[4], on[4]))
