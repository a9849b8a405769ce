"""Checks of lab 06 (Conv2D + ReLU fusion): the GM round trip a separate ReLU costs, and the block sizes of
the fused kernel (the fused pipeline's check is in :mod:`.lab06_pipeline`)."""

from __future__ import annotations

import numpy as np

from ..config import a2, classic
from ..conv import ConvGeometry
from ..errors import NpuSimError
from ..kernels import fusion_lab as fl
from ..pipes import Pipe
from ._core import CheckFailed, as_int, call_learner, case_rng, describe, passed
from ._flow import Skeleton

__all__ = ["round_trip_bytes", "fused_block"]

HINTS = {
    "round-trip-bytes": (
        "Section 1's table: which launch touches y, and how many times does each output element cross the "
        "GM port because the ReLU is a kernel of its own?",
        "First the output's size: its height and width follow from the input's, the kernel's, the stride and "
        "the padding (the formula torch.nn.Conv2d documents); then the number of output elements, over the "
        "whole batch and every output channel. Then: how many times does the ReLU kernel move each of them, "
        "and how many bytes is one?",
        Skeleton(
            "def round_trip_bytes(x_shape, w_shape, stride, padding, itemsize):\n"
            "    n, _, h, wd = x_shape\n"
            "    cout, _, kh, kw = w_shape\n"
            "    ho = ___\n"
            "    wo = ___\n"
            "    return ___ * n * cout * ho * wo\n",
            call="check.round_trip_bytes(round_trip_bytes)"),
    ),
    "fused-block": (
        "Three things cost time in the fused kernel: an Mmad pays a start-up whatever its size, every weight "
        "tile is loaded into L0B once per tile of positions, every im2col tile into L0A once per block of "
        "output channels. The largest block the four memories of section 4 hold twice pays each as rarely "
        "as possible.",
        "Decide n first (how many output channels should one im2col tile serve?), then m (what limits the "
        "positions of a tile: the accumulators in L0C, on classic also the drain in UB, and what a band "
        "holds), then k with that m and n (L0A and L0B hold two of their tiles each; K itself is finite). "
        "Every size a multiple of 16. Section 4's table gives each buffer's bytes.",
        Skeleton(
            "def fused_block(g, cfg):\n"
            "    n = round_up(___, 16)\n"
            "    room = cfg.l0c_bytes // (___)          # positions: two fp32 accumulators of n channels\n"
            "    if not cfg.has_fixpipe:\n"
            "        room = min(room, cfg.ub_bytes // (n * 10))\n"
            "    m = min(room, 256, round_up(___, 16)) // 16 * 16\n"
            "    k = min(cfg.l0a_bytes // (___), cfg.l0b_bytes // (___)) // 16 * 16\n"
            "    return m, n, min(k, round_up(g.c1 * g.kk * g.c0, 16))\n",
            call="check.fused_block(fused_block)",
            setup="import npusim as ns\nfrom npusim import checks as check\nfrom npusim.conv.common import "
                  "round_up\nfrom npusim.kernels import fusion_lab as fl"),
    ),
}


# --- exercise 1: the round trip ---------------------------------------------------------------------------

_ROUND_TRIP_FIXED = [  # (x shape, w shape, stride, padding, itemsize): the lab's layer, batch 2 + stride 2 +
    # padding 2, Cin != Cout with stride 2 and no padding, fp32 outputs and Cout < Cin
    ((1, 64, 56, 56), (64, 64, 3, 3), 1, 1, 2), ((2, 3, 17, 13), (10, 3, 5, 5), 2, 2, 2),
    ((1, 256, 14, 14), (512, 256, 1, 1), 2, 0, 2), ((4, 8, 9, 9), (3, 8, 3, 3), 1, 0, 4),
]


def _round_trip_cases() -> list[tuple]:
    rng = case_rng("round_trip_bytes", "random")
    out = list(_ROUND_TRIP_FIXED)
    for _ in range(3):
        k = int(rng.choice([1, 3, 5, 7]))
        h, w = int(rng.integers(k, 60)), int(rng.integers(k, 60))
        out.append(((int(rng.integers(1, 5)), int(rng.integers(1, 200)), h, w),
                    (int(rng.integers(1, 300)), 0, k, k), int(rng.integers(1, 4)), int(rng.integers(0, 4)),
                    int(rng.choice([1, 2, 4]))))
    return [(xs, (ws[0], xs[1], ws[2], ws[3]), s, p, isz) for xs, ws, s, p, isz in out]


def _round_trip_mistakes(x_shape, w_shape, s: int, p: int, isz: int) -> dict[str, int]:
    """What the known mistakes give on one layer: mistake -> bytes."""
    n, cin, h, w = x_shape
    cout, _, kh, kw = w_shape
    ho, wo = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    right = 2 * n * cout * ho * wo * isz
    return {"that is one way only: the ReLU kernel reads y (MTE2) AND writes relu(y) back (MTE3)": right // 2,
            "that counts elements: multiply by itemsize bytes per element": right // isz,
            "that is the input's size: the ReLU kernel moves the OUTPUT y": 2 * n * cin * h * w * isz,
            "that uses Cin: the output has Cout channels": 2 * n * cin * ho * wo * isz,
            "that is one image: the batch has N of them": 2 * cout * ho * wo * isz,
            "that is the input's height and width: compute Ho and Wo": 2 * n * cout * h * w * isz,
            "the stride is missing from Ho and Wo": 2 * n * cout * (h + 2 * p - kh + 1) * (w + 2 * p - kw + 1) * isz,
            "the padding is missing from Ho and Wo": 2 * n * cout * ((h - kh) // s + 1) * ((w - kw) // s + 1) * isz,
            "that counts the conv kernel's write of y too; fusion keeps that one": 3 * right // 2}


def _round_trip_cause(results: list[tuple]) -> str:
    """The known mistake that explains the learner's answer on every hidden layer, if one does."""
    for why in _round_trip_mistakes(*results[0][0]):
        if all(got == _round_trip_mistakes(*case)[why] for case, got, _ in results):
            return f" Your numbers match a known mistake on every hidden layer: {why}."
    return (" Look at the output size (Ho = (H + 2*pad - Kh) // stride + 1) and how many times the ReLU kernel "
            "moves each output element over the GM port.")


def round_trip_bytes(fn) -> None:
    """Lab 06, exercise 1: ``fn(x_shape, w_shape, stride, padding, itemsize) -> int`` is the GM bytes that a
    separate ReLU kernel moves after the convolution (and that fusion removes), on hidden layers."""
    __tracebackhide__ = True
    name = "round_trip_bytes"
    cases = _round_trip_cases()
    results = []
    for x_shape, w_shape, s, p, isz in cases:
        case = {"x": x_shape, "w": w_shape, "stride": s, "padding": p, "itemsize": isz}
        raw = call_learner(name, fn, x_shape, w_shape, s, p, isz, case=case, what="your function")
        got = as_int(name, raw, f"on [{describe(case)}] the byte count")
        g = ConvGeometry.of(x_shape, w_shape, s, p)
        results.append(((x_shape, w_shape, s, p, isz), got, 2 * g.n * g.cout * g.ho * g.wo * isz))
    for (x_shape, w_shape, s, p, isz), got, want in results:
        if got != want:
            case = {"x": x_shape, "w": w_shape, "stride": s, "padding": p, "itemsize": isz}
            raise CheckFailed(name, f"on [{describe(case)}] expected {want:,} B, got {got:,} B."
                                    + _round_trip_cause(results))
    passed(name, f"{len(cases)} hidden layers (batch, stride, padding, Cin != Cout, 1-, 2- and 4-byte outputs): "
                 f"the ReLU kernel reads and writes the output once each")


# --- shared by exercises 2 and 3 ----------------------------------------------------------------------------

def _layer(case, seed: int):
    n, cin, h, w, cout, k, s, p, bias = case[:9]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float16)
    wt = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float16) if bias else None
    return x, wt, b


def _words(cfg, case) -> dict:
    n, cin, h, w, cout, k, s, p, bias = case[:9]
    return {"config": cfg.name, "input": f"{n}x{cin}x{h}x{w}", "cout": cout, "kernel": f"{k}x{k}",
            "stride": s, "padding": p, "bias": bias}


def _random_layers(check: str, count: int) -> list[tuple]:
    """Random layers the lab kernel can hold (all weights in L1), on either preset."""
    rng = case_rng(check, "random")
    out = []
    while len(out) < count:
        k = int(rng.choice([1, 3, 5]))
        case = (int(rng.integers(1, 3)), int(rng.integers(3, 65)), int(rng.integers(k, 24)), int(rng.integers(k, 24)),
                int(rng.integers(5, 200)), k, int(rng.integers(1, 3)), int(rng.integers(0, 3)), bool(rng.integers(2)))
        cfg = (a2, classic)[int(rng.integers(2))]
        try:
            fl.band_rows(ConvGeometry.of(case[:4], (case[4], case[1], k, k), case[6], case[7]), cfg)
        except NpuSimError:
            continue
        out.append((cfg, case))
    return out


def _l0_bytes(prof) -> int:
    return prof.path_bytes.get("L1->L0A", 0) + prof.path_bytes.get("L1->L0B", 0)


# --- exercise 2: the block ---------------------------------------------------------------------------------

# (preset, (n, cin, h, w, cout, k, stride, padding, bias)): a few output channels (L0C leaves room for many
# positions, L0A then limits K), many of them on classic (UB binds, not L0C), Cout not a multiple of 16,
# a long K (5 x 5 x 48), a 1 x 1 layer whose K is one C0 block, a 3 x 3 layer on each preset
_BLOCK_FIXED = [
    (a2, (1, 32, 28, 28, 32, 3, 1, 1, False)), (classic, (1, 16, 12, 64, 208, 3, 1, 1, False)),
    (a2, (2, 24, 15, 17, 300, 3, 2, 1, False)), (classic, (1, 48, 12, 12, 96, 5, 1, 2, False)),
    (a2, (1, 16, 28, 28, 64, 1, 1, 0, False)), (classic, (1, 16, 32, 32, 32, 3, 1, 1, False)),
    (a2, (2, 28, 24, 23, 8, 5, 2, 2, False)),
]
BLOCK_TIME_TARGET = 1.35
"""The learner's block may take at most this times the kernel time of :func:`fl.reference_block`'s block."""
BLOCK_BYTES_TARGET = 1.5
"""...and move at most this times its L1 -> L0A/L0B bytes (the reuse)."""


def _room(g, cfg, m: int, n: int) -> tuple[int, int]:
    """(the most positions L0C/UB hold twice for ``n`` channels, the longest K step L0A/L0B hold for m, n)."""
    m_room = min(cfg.l0c_bytes // (8 * n), cfg.ub_bytes // (n * fl.DRAIN_UB_BYTES) if not cfg.has_fixpipe
                 else 4095) // 16 * 16
    k_room = min(cfg.l0a_bytes // (4 * m), cfg.l0b_bytes // (4 * n)) // g.c0 * g.c0
    return m_room, k_room


def _block_causes(g, cfg, blk, ref, mine, theirs) -> str:
    """Why a block is slower or reloads more than the reference, measured: Mmad counts, bytes per path."""
    k_all = g.c1 * g.kk * g.c0
    m_room, k_room = _room(g, cfg, blk.m, blk.n)
    cout16 = -(-g.cout // 16) * 16
    lines = []
    if blk.n < cout16 and blk.n < ref.n:
        lines.append(f"n={blk.n} < Cout={g.cout}: every im2col tile is built {-(-g.cout // blk.n)} times, once per "
                     f"block of output channels (L1->L0A {mine.path_bytes.get('L1->L0A', 0):,} B, "
                     f"{mine.path_bytes.get('L1->L0A', 0) / max(1, theirs.path_bytes.get('L1->L0A', 0)):.1f}x a block "
                     f"with the most reuse): a larger n builds each im2col tile fewer times")
    if blk.n > cout16:
        lines.append(f"n={blk.n} is more than the layer's {cout16} channels (rounded up to 16): that room in L0B, "
                     f"L0C and UB is never used, and takes it from m and k")
    positions = fl.band_rows(g, cfg) * g.wo
    if blk.m > -(-positions // 16) * 16:
        lines.append(f"m={blk.m}, but a band has {positions} positions ({fl.band_rows(g, cfg)} rows of {g.wo}): a "
                     f"tile never holds more, so the rest of its L0C room is never used, and the L0A room it "
                     f"reserves is taken from k (k={blk.k}): an m no larger than a band's positions leaves "
                     f"room for a longer k")
    mmads = sum(1 for i in mine.instructions if i.pipe is Pipe.M)
    ref_mmads = sum(1 for i in theirs.instructions if i.pipe is Pipe.M)
    if blk.k < min(k_room, k_all) and mmads > 1.2 * ref_mmads:
        lines.append(f"k={blk.k}: each tile takes {-(-k_all // blk.k)} K steps of {blk.k} of the {k_all} im2col "
                     f"columns, {mmads:,} Mmads in all ({mmads / ref_mmads:.1f}x a block with the most reuse), each "
                     f"paying the Cube's start-up; L0A and L0B have room for a longer k with your m and n")
    if blk.m < min(m_room, fl.M_CAP) and mine.path_bytes.get("L1->L0B", 0) > 1.2 * theirs.path_bytes.get("L1->L0B", 0):
        lines.append(f"m={blk.m}: every weight tile is loaded into L0B once per {blk.m} positions (L1->L0B "
                     f"{mine.path_bytes.get('L1->L0B', 0):,} B, "
                     f"{mine.path_bytes.get('L1->L0B', 0) / max(1, theirs.path_bytes.get('L1->L0B', 0)):.1f}x a "
                     f"block with the most reuse); L0C{'' if cfg.has_fixpipe else ' and UB'} "
                     f"hold{'s' if cfg.has_fixpipe else ''} two tiles of a larger m with n={blk.n}: a larger m "
                     f"loads each weight tile fewer times")
    if blk.m > fl.M_CAP and blk.k < k_room * 2:
        lines.append(f"m={blk.m} leaves L0A room for k={blk.k} only: an Mmad of m x n x k pays its start-up "
                     f"once, so m and k should both be large (L0A holds 2 x m x k x 2 B): 256 x 64 beats "
                     f"1024 x 16, and the last tile's drain, which nothing overlaps, grows with m")
    # directions only: the reference block itself would be a passing answer
    return ". ".join(lines) + "." if lines else ("Look at your kernel's timeline (views.timeline): which pipe "
                                                 "waits, and which of m, n, k would make it wait less?")


def _block_of(name: str, fn, g, cfg, words: dict):
    got = call_learner(name, fn, g, cfg, case=words, what="your function")
    if not (isinstance(got, tuple) and len(got) == 3):
        raise CheckFailed(name, f"on [{describe(words)}] fused_block must return a tuple (m, n, k), got {got!r}")
    m, n, k = (as_int(name, v, f"on [{describe(words)}] {what}") for v, what in zip(got, "mnk"))
    try:
        return fl.check_block(g, cfg, (m, n, k))
    except NpuSimError as e:
        raise CheckFailed(name, f"on [{describe(words)}] the block (m={m}, n={n}, k={k}) is not valid: "
                                f"{str(e).splitlines()[0].removeprefix('fused block: ')}") from None


def fused_block(fn) -> None:
    """Lab 06, exercise 2: ``fn(g, cfg) -> (m, n, k)`` is a block of the fused kernel that fits L0A, L0B, L0C
    (and UB on classic) and, on hidden layers and both presets, makes the reference kernel at most
    :data:`BLOCK_TIME_TARGET` times slower than :func:`npusim.kernels.fusion_lab.reference_block`'s block and
    move at most :data:`BLOCK_BYTES_TARGET` times its L1 -> L0 bytes."""
    __tracebackhide__ = True
    name = "fused_block"
    cases = list(_BLOCK_FIXED) + _random_layers(name, 3)
    worst = 0.0
    for i, (cfg, case) in enumerate(cases):
        x, wt, b = _layer(case, 610 + i)
        words = _words(cfg, case)
        g = ConvGeometry.of(x.shape, wt.shape, case[6], case[7])
        blk = _block_of(name, fn, g, cfg, words)
        ref = fl.reference_block(g, cfg)
        theirs = fl.run_fused(x, wt, b, case[6], case[7], block=ref, config=cfg, sanitize="off").profile
        mine = fl.run_fused(x, wt, b, case[6], case[7], block=blk, config=cfg, sanitize="off").profile
        t_ratio, b_ratio = mine.total_cycles / theirs.total_cycles, _l0_bytes(mine) / _l0_bytes(theirs)
        worst = max(worst, t_ratio)
        if t_ratio > BLOCK_TIME_TARGET or b_ratio > BLOCK_BYTES_TARGET:
            what = (f"{t_ratio:.2f}x the time" if t_ratio > BLOCK_TIME_TARGET else "") + \
                   (" and " if t_ratio > BLOCK_TIME_TARGET and b_ratio > BLOCK_BYTES_TARGET else "") + \
                   (f"{b_ratio:.2f}x the L1 -> L0A/L0B bytes" if b_ratio > BLOCK_BYTES_TARGET else "")
            raise CheckFailed(name, f"on [{describe(words)}] your block (m={blk.m}, n={blk.n}, k={blk.k}) fits, but "
                                    f"the kernel takes {mine.time_us:.2f} us and moves {_l0_bytes(mine):,} B L1 -> L0: "
                                    f"{what} of a block with the most reuse (targets: {BLOCK_TIME_TARGET}x the "
                                    f"time, {BLOCK_BYTES_TARGET}x the bytes). "
                                    + _block_causes(g, cfg, blk, ref, mine, theirs))
    passed(name, f"{len(cases)} hidden layers on a2 and classic: every block fits, and is at most {worst:.2f}x the "
                 f"time of the reference block")
