"""Checks of lab 03 (matmul on the Cube): the tiled kernel, and a tiling that meets a utilisation target."""

from __future__ import annotations

import numpy as np

from ..errors import NpuSimError
from ..kernels.matmul import MatmulTiling
from ..launch import launch
from ._core import CheckFailed, call_learner, case_rng, describe, fixed_rng, mismatch, passed, run_kernel
from ._flow import Skeleton
from ._work import require_work

__all__ = ["matmul", "matmul_reuse"]

_MATMUL_SKELETON = """\
@ns.kernel
def matmul_kernel(a, b, c, m: int, n: int, k: int, tiling: MatmulTiling) -> None:
    t = tiling
    bm16, bn16, bk16 = (-(-v // 16) * 16 for v in (t.base_m, t.base_n, t.base_k))
    pipe = ns.TPipe()
    q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
    q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
    q_co1 = ns.TQue(ns.TPosition.CO1)
    pipe.init_buffer(q_a1, t.buffer_num, bm16 * bk16 * 2)
    pipe.init_buffer(q_b1, t.buffer_num, bk16 * bn16 * 2)
    pipe.init_buffer(q_a2, t.buffer_num, bm16 * bk16 * 2)
    pipe.init_buffer(q_b2, t.buffer_num, bk16 * bn16 * 2)
    pipe.init_buffer(q_co1, t.buffer_num, bm16 * bn16 * 4)
    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
    for tile in range(___):                      # this block's output tiles
        i0, j0 = ___                                # the tile's first row and column in c
        tm, tn = min(t.base_m, m - i0), min(t.base_n, n - j0)
        m1, n1 = -(-tm // 16), -(-tn // 16)
        c_l0 = q_co1.alloc_tensor(ns.float32)
        for kk in range(0, k, t.base_k):
            tk = min(t.base_k, k - kk)
            k1 = -(-tk // 16)
            a_l1 = q_a1.alloc_tensor(ns.float16)
            copy_strips(a_l1, a[___:], tm, tk, ___)    # where A's piece starts, how far apart its rows are
            q_a1.enque(a_l1)
            b_l1 = q_b1.alloc_tensor(ns.float16)
            copy_strips(b_l1, b[___:], tk, tn, ___)
            q_b1.enque(b_l1)
            a_l1, b_l1 = q_a1.deque(), q_b1.deque()
            a_l0 = q_a2.alloc_tensor(ns.float16)
            ns.load_data(a_l0, a_l1, ns.LoadData2DParams(repeat_times=m1 * k1))
            q_a2.enque(a_l0)
            b_l0 = q_b2.alloc_tensor(ns.float16)
            ns.load_data(b_l0, b_l1, ns.LoadData2DParams(repeat_times=k1 * n1, if_transpose=True))
            q_b2.enque(b_l0)
            q_a1.free_tensor(a_l1)
            q_b1.free_tensor(b_l1)
            a_l0, b_l0 = q_a2.deque(), q_b2.deque()
            ns.mmad(c_l0, a_l0, b_l0, ns.MmadParams(tm, tn, tk, cmatrix_init_val=___))
            q_a2.free_tensor(a_l0)
            q_b2.free_tensor(b_l0)
        q_co1.enque(c_l0)
        c_l0 = q_co1.deque()
        ns.fixpipe(c[___:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=___))
        q_co1.free_tensor(c_l0)"""

_REUSE_SKELETON = """\
@ns.kernel
def matmul_reuse_kernel(a, b, c, m: int, n: int, k: int, tiling: MatmulTiling) -> None:
    t = tiling
    bm16, bn16, bk16, k16 = (-(-v // 16) * 16 for v in (t.base_m, t.base_n, t.base_k, k))
    pipe = ns.TPipe()
    q_a1, q_b1 = ns.TQue(ns.TPosition.A1), ns.TQue(ns.TPosition.B1)
    q_a2, q_b2 = ns.TQue(ns.TPosition.A2), ns.TQue(ns.TPosition.B2)
    q_co1 = ns.TQue(ns.TPosition.CO1)
    pipe.init_buffer(q_a1, 1, bm16 * k16 * 2)                  # one strip of A: base_m rows x all of K
    pipe.init_buffer(q_b1, t.buffer_num, bk16 * bn16 * 2)
    pipe.init_buffer(q_a2, t.buffer_num, bm16 * bk16 * 2)
    pipe.init_buffer(q_b2, t.buffer_num, bk16 * bn16 * 2)
    pipe.init_buffer(q_co1, 1, bm16 * bn16 * 4)
    tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
    k1_all = -(-k // 16)
    for row in range(___):                       # this block's rows of output tiles
        i0 = row * t.base_m
        tm = min(t.base_m, m - i0)
        m1 = -(-tm // 16)
        a_l1 = q_a1.alloc_tensor(ns.float16)
        copy_strips(a_l1, a[___:], ___, ___, k)     # the row's whole strip of A, once
        q_a1.enque(a_l1)
        a_l1 = q_a1.deque()
        for col in range(tiles_n):
            j0 = col * t.base_n
            tn = min(t.base_n, n - j0)
            n1 = -(-tn // 16)
            c_l0 = q_co1.alloc_tensor(ns.float32)
            for kk in range(0, k, t.base_k):
                tk = min(t.base_k, k - kk)
                k1 = -(-tk // 16)
                b_l1 = q_b1.alloc_tensor(ns.float16)
                copy_strips(b_l1, b[kk * n + j0:], tk, tn, n)
                q_b1.enque(b_l1)
                b_l1 = q_b1.deque()
                a_l0 = q_a2.alloc_tensor(ns.float16)
                for i in range(m1):                           # the tile's 16-row block i
                    ns.load_data(a_l0[i * k1 * 256:], a_l1,
                                 ns.LoadData2DParams(start_index=___, repeat_times=k1))
                q_a2.enque(a_l0)
                b_l0 = q_b2.alloc_tensor(ns.float16)
                ns.load_data(b_l0, b_l1, ns.LoadData2DParams(repeat_times=k1 * n1, if_transpose=True))
                q_b2.enque(b_l0)
                q_b1.free_tensor(b_l1)
                a_l0, b_l0 = q_a2.deque(), q_b2.deque()
                ns.mmad(c_l0, a_l0, b_l0, ns.MmadParams(tm, tn, tk, cmatrix_init_val=(kk == 0)))
                q_a2.free_tensor(a_l0)
                q_b2.free_tensor(b_l0)
            q_co1.enque(c_l0)
            c_l0 = q_co1.deque()
            ns.fixpipe(c[i0 * n + j0:], c_l0, ns.FixpipeParams(tm, tn, dst_stride=n))
            q_co1.free_tensor(c_l0)
        q_a1.free_tensor(a_l1)


def reuse_tiling() -> MatmulTiling:
    return MatmulTiling(base_m=___, base_n=___, base_k=___, buffer_num=___)"""

HINTS = {
    "matmul": (
        "The one-tile kernel of section 2 is the body of one K step; around it go two loops: over this "
        "block's output tiles, and inside each over the K steps. Which offsets and sizes change from tile to "
        "tile, and which Mmad must not add onto what L0C holds?",
        "Number the output tiles row by row and let block b take every block_num-th tile from tile b on. From "
        "a tile's number follow its first row and column in c (its size is given: edge tiles are smaller). "
        "For each tile: one L0C tensor; then per K step copy A's and B's pieces of that step into L1 "
        "(copy_strips: where does each piece start in GM, and how far apart are its rows there?), move them "
        "into L0A / L0B as section 2 does, and Mmad, deciding which Mmad starts L0C afresh. Then fixpipe the "
        "tile to its place in c, whose rows are how far apart?",
        Skeleton(_MATMUL_SKELETON, call="check.matmul(matmul_kernel)", cells=("03_mat-356a192b", "03_mat-ex1"),
                 intro="Your kernel, with the decisions left blank:"),
    ),
    "matmul-reuse": (
        "Exercise 1's kernel with its loops turned around: the row of output tiles is the outer loop, A's "
        "strip for that row goes into L1 before the tiles of the row, and each K step only copies B. The "
        "new part is finding a K step's fractals inside the strip.",
        "Each block takes its own rows of output tiles. Per row: copy the row's whole strip of A (all of K) "
        "into L1 once; then for each tile of the row, exercise 1's K loop without A's copy. In each K step L0A "
        "gets, for every 16-row block of the tile, this step's fractals of that block, which sit inside the "
        "strip's NZ layout (count the strip's fractals per 16-row block: it holds all of K, not one step). "
        "Free the strip after its row. For the target: the output tile's size decides how often each loaded "
        "byte of B is reused, and a second buffer lets B's copies overlap the Mmads.",
        Skeleton(_REUSE_SKELETON, call="check.matmul_reuse(matmul_reuse_kernel, reuse_tiling)",
                 cells=("03_mat-356a192b", "03_mat-reuse"),
                 intro="Your kernel and tiling, with the decisions left blank:"),
    ),
}


def _frac_transposed(b: np.ndarray) -> np.ndarray:
    """b with each 16x16 block transposed (what L0B holds without if_transpose, read as ZN)."""
    k, n = b.shape
    kp, np_ = -(-k // 16) * 16, -(-n // 16) * 16
    pad = np.zeros((kp, np_), b.dtype)
    pad[:k, :n] = b
    blocks = pad.reshape(kp // 16, 16, np_ // 16, 16).transpose(0, 3, 2, 1).reshape(kp, np_)
    return blocks[:k, :n]


def _written_with_stride(want: np.ndarray, t: MatmulTiling, stride) -> np.ndarray:
    """What c holds if every tile's rows were written ``stride(tn)`` apart (tiles in order, NaN elsewhere)."""
    m, n = want.shape
    flat = np.full(m * n, np.nan)
    for i0 in range(0, m, t.base_m):
        for j0 in range(0, n, t.base_n):
            tm, tn = min(t.base_m, m - i0), min(t.base_n, n - j0)
            for r in range(tm):
                lo = i0 * n + j0 + r * stride(tn)
                if lo + tn <= flat.size:
                    flat[lo:lo + tn] = want[i0 + r, j0:j0 + tn]
    return flat.reshape(m, n)


def _same_nan(g: np.ndarray, w: np.ndarray) -> bool:
    both = np.isnan(g) & np.isnan(w)
    return bool(np.all(both | np.isclose(g, w, rtol=1e-4, atol=1e-2)))


def _causes(got, a, b, m, n, k, t: MatmulTiling):
    """Likely causes of a wrong c, from which tiles are wrong and what they hold."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    def near(x, y):
        return x.shape == y.shape and np.allclose(x, y, rtol=1e-4, atol=1e-3 * np.sqrt(k))

    def causes(mm) -> str:
        g = got.astype(np.float64)
        if np.isnan(g).all():
            return ("Every element is NaN: L0C was drained without an Mmad writing it first. Either no K step "
                    "ran (is the K loop empty when k < base_k?), or the first Mmad added onto an L0C nobody "
                    "wrote (cmatrix_init_val=True on the first K step).")
        if near(g, a64 @ _frac_transposed(b).astype(np.float64)):
            return ("c equals a @ B with every 16x16 block of B transposed: load_data into L0B needs "
                    "if_transpose=True (L0B holds ZN, each fractal transposed).")
        last = (k - 1) // t.base_k * t.base_k
        if k > t.base_k and near(g, a64[:, last:] @ b64[last:, :]):
            return ("c holds only the last K step's product: every Mmad started L0C from zero. Only the first K "
                    "step of an output tile may set cmatrix_init_val=True; later ones accumulate.")
        tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
        for what, stride in (("tn (the tile's width)", lambda tn: tn), ("base_n", lambda tn: t.base_n)):
            if stride(min(t.base_n, n)) != n and _same_nan(g, _written_with_stride(a64 @ b64, t, stride)):
                return (f"The rows of each tile are written {what} apart in c; in GM they are n={n} apart: "
                        f"fixpipe's dst_stride is the distance between two rows of c.")
        bad = ~np.isclose(g, a64 @ b64, rtol=1e-4, atol=1e-3 * np.sqrt(k))
        bad_tiles = {(i // t.base_m, j // t.base_n) for i, j in zip(*np.nonzero(bad))}
        edge_rows = m % t.base_m and all(ti == tiles_m - 1 for ti, _ in bad_tiles)
        edge_cols = n % t.base_n and all(tj == tiles_n - 1 for _, tj in bad_tiles)
        if bad_tiles and (edge_rows or edge_cols):
            side = "bottom row of tiles (m is not a multiple of base_m)" if edge_rows else \
                "right column of tiles (n is not a multiple of base_n)"
            also = (" It is also the only row of tiles below the first: look at A's row offset too." if edge_rows
                    and tiles_m == 2 else " It is also the only column of tiles right of the first: look at "
                    "B's column offset too." if edge_cols and tiles_n == 2 else "")
            return f"Only the {side} is wrong: look at the sizes tm / tn of a partial tile.{also}"
        if k % t.base_k and near(g, a64[:, :k - k % t.base_k] @ b64[:k - k % t.base_k, :]):
            return (f"c misses the last, shorter K step (k={k} is not a multiple of base_k={t.base_k}): its "
                    f"{k % t.base_k} columns of A / rows of B are never multiplied.")
        want_sorted = np.sort((a64 @ b64).reshape(-1))
        if np.isfinite(g).all() and np.allclose(np.sort(g.reshape(-1)), want_sorted, rtol=1e-4, atol=1e-3):
            return ("The right values, at the wrong places: look at where each tile is written (its GM offset "
                    "i0 * n + j0) and fixpipe's dst_stride, the distance between two rows of c in GM (n).")
        if mm.never_written:
            return "Some output tiles were never written: does every tile of this block reach fixpipe?"
        if len(bad_tiles) < tiles_m * tiles_n:
            first = sorted(bad_tiles)[0]
            return (f"{len(bad_tiles)} of {tiles_m * tiles_n} output tiles are wrong, the first at tile row "
                    f"{first[0]}, column {first[1]}: look at the offsets of A's and B's tiles for that tile.")
        return ("Every tile is wrong: look at the offsets of A's and B's tiles in GM (element (i, j) of a "
                "matrix with K columns is at i * K + j) and at copy_strips' row stride.")

    return causes


_CASES = [  # (m, k, n, tiling, block_dim): one tile, 1x1x1, full tiles in a 3x2 grid, sizes that are no
    # multiple of 16, a K tail, edge tiles in both directions, several blocks (round-robin over the tiles)
    (16, 16, 16, MatmulTiling(16, 16, 16, 1), 1), (1, 1, 1, MatmulTiling(16, 16, 16, 2), 1),
    (96, 64, 64, MatmulTiling(32, 32, 32, 2), 1),
    (37, 50, 29, MatmulTiling(32, 32, 32, 2), 1), (64, 96, 64, MatmulTiling(64, 64, 32, 2), 1),
    (100, 200, 150, MatmulTiling(64, 32, 64, 2), 1), (128, 96, 64, MatmulTiling(64, 64, 32, 2), 2),
    (100, 70, 150, MatmulTiling(32, 64, 32, 1), 3),
]


def _cases() -> list[tuple]:
    rng = case_rng("matmul", "random")
    out = list(_CASES)
    for _ in range(2):
        t = MatmulTiling(*(16 * int(rng.integers(1, 5)) for _ in range(3)), int(rng.integers(1, 3)))
        out.append((int(rng.integers(1, 120)), int(rng.integers(1, 150)), int(rng.integers(1, 120)), t,
                    int(rng.integers(1, 4))))
    return out


def _require_matmul_work(name: str, profile, a, b, c, case: dict) -> None:
    """A and B read into L1, every MAC on the Cube, c drained from L0C by fixpipe."""
    (m, k), n = a.shape, b.shape[1]
    require_work(name, profile, case, moved={"GM->L1": a.nbytes + b.nbytes, "L0C->GM": c.nbytes}, macs=m * n * k,
                 how="copy_strips into L1, load_data, ns.mmad, ns.fixpipe")


def matmul(kernel) -> None:
    """Lab 03, exercise 1: ``kernel(a, b, c, m, n, k, tiling)`` computes ``c = a @ b`` (fp16 in, fp32 out)
    on hidden shapes, tilings and block counts."""
    __tracebackhide__ = True
    name = "matmul"
    cases = _cases()
    for i, (m, k, n, tiling, bd) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_CASES) else case_rng(name, i)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.full((m, n), np.nan, np.float32)
        case = {"m": m, "k": k, "n": n, "tiling": f"{tiling.base_m}x{tiling.base_n}x{tiling.base_k}",
                "buffer_num": tiling.buffer_num, "block_dim": bd}
        run = run_kernel(name, kernel, bd, a, b, c, m, n, k, tiling, case=case)
        want = a.astype(np.float64) @ b.astype(np.float64)
        mm = mismatch(c, want, rtol=1e-5, atol=1e-5 * np.sqrt(k))
        if mm is not None:
            raise CheckFailed(name, f"on [{describe(case)}] {mm.where()}; {mm.example()}. "
                                    + _causes(c, a, b, m, n, k, tiling)(mm))
        _require_matmul_work(name, run.profile, a, b, c, case)
    passed(name, f"{len(cases)} hidden shapes (1x1x1, sizes that are no multiple of 16, K tails, edge tiles, "
                 f"several blocks)")


REUSE_TARGET = 0.65
REUSE_SHAPE = (1024, 1024, 1024)
REUSE_CORES = 8

_REUSE_CASES = [  # (m, k, n, tiling, block_dim): one tile, odd sizes, K not a multiple of base_k or of 16,
    # several rows of tiles per block, fewer rows than blocks
    (16, 16, 16, MatmulTiling(16, 16, 16, 1), 1), (1, 1, 1, MatmulTiling(16, 16, 16, 2), 1),
    (96, 64, 64, MatmulTiling(32, 32, 32, 2), 1), (37, 50, 29, MatmulTiling(32, 32, 32, 2), 1),
    (100, 200, 150, MatmulTiling(64, 32, 64, 2), 2), (300, 100, 70, MatmulTiling(64, 64, 32, 2), 3),
    (40, 33, 20, MatmulTiling(16, 16, 16, 1), 5),
]


def _gm_to_l1(profile) -> int:
    return sum(v for k, v in profile.path_bytes.items() if k.startswith("GM") and k.endswith("L1"))


def matmul_reuse(kernel, tiling) -> None:
    """Lab 03, exercise 2: ``kernel(a, b, c, m, n, k, tiling)`` computes ``c = a @ b`` on hidden shapes and
    block counts, copies each row strip of A from GM once, and with ``tiling`` (a MatmulTiling, or a
    function returning one) reaches 65 % Cube utilisation on 1024^3 fp16 on 8 cores."""
    __tracebackhide__ = True
    name = "matmul_reuse"
    for i, (m, k, n, t, bd) in enumerate(_REUSE_CASES):
        rng = fixed_rng(name, i)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.full((m, n), np.nan, np.float32)
        case = {"m": m, "k": k, "n": n, "tiling": f"{t.base_m}x{t.base_n}x{t.base_k}", "buffer_num": t.buffer_num,
                "block_dim": bd}
        run = run_kernel(name, kernel, bd, a, b, c, m, n, k, t, case=case)
        mm = mismatch(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5 * np.sqrt(k))
        if mm is not None:
            why = _causes(c, a, b, m, n, k, t)(mm)
            if "offsets" in why or "Every tile is wrong" in why:
                why += (" With A's strip in L1, a K step's fractals of row block i start at fractal "
                        "i * ceil(k / 16) + kk // 16 of the strip.")
            raise CheckFailed(name, f"on [{describe(case)}] {mm.where()}; {mm.example()}. {why}")
        _require_matmul_work(name, run.profile, a, b, c, case)
        tiles_m, tiles_n = -(-m // t.base_m), -(-n // t.base_n)
        # whole granules: each 16-row strip row is padded to 32 B in GM reads
        a_once = sum(-(-k * 2 // 32) * 32 * min(16, m - r) for r in range(0, m, 16))
        b_reads = tiles_m * sum(-(-min(t.base_n, n - j) * 2 // 32) * 32 * k for j in range(0, n, t.base_n))
        got = _gm_to_l1(run.profile)
        if tiles_n > 1 and got > a_once + b_reads:
            times = (got - b_reads) / a_once
            raise CheckFailed(name, f"correct on [{describe(case)}], but your kernel copied {got:,} B from GM to L1, "
                                    f"A's strips about {times:.1f} times over: each row strip of A must be copied "
                                    f"once and reused by the {tiles_n} output tiles of its row (and no two blocks "
                                    f"may take the same row).")
    if callable(tiling) and not isinstance(tiling, MatmulTiling):
        tiling = call_learner(name, tiling)
    if not isinstance(tiling, MatmulTiling):
        raise CheckFailed(name, f"expected a MatmulTiling(base_m, base_n, base_k, buffer_num), got {tiling!r}")
    m, k, n = REUSE_SHAPE
    rng = fixed_rng(name, "target")
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    case = {"m": m, "k": k, "n": n, "tiling": f"{tiling.base_m}x{tiling.base_n}x{tiling.base_k}",
            "buffer_num": tiling.buffer_num, "block_dim": REUSE_CORES}
    try:
        prof = launch(kernel, REUSE_CORES, a, b, c, m, n, k, tiling).profile
    except NpuSimError as e:
        raise CheckFailed(name, f"the tiling {tiling} does not run with your kernel on {m}x{k}x{n}: "
                                f"{type(e).__name__}: {e}") from None
    except Exception:  # noqa: BLE001 - run it the checked way for the learner-facing message
        prof = run_kernel(name, kernel, REUSE_CORES, a, b, c, m, n, k, tiling, case=case).profile
    if not np.allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-2):
        raise CheckFailed(name, f"on [{describe(case)}] your kernel's result is wrong")
    u = prof.mac_utilization
    if u < REUSE_TARGET:
        spans = [e - s for s, e in zip(prof.block_start_cycles, prof.block_end_cycles)]
        idle = sum(1 for d in spans if d < 0.05 * max(spans))   # blocks that finished almost at once
        rows = -(-m // tiling.base_m)
        extra = (f" Only {rows} rows of output tiles for {REUSE_CORES} blocks: {REUSE_CORES - rows} cores have "
                 f"nothing to do." if rows < REUSE_CORES else "")
        raise CheckFailed(name, f"{tiling} reaches {u:.1%} Cube utilisation on {REUSE_CORES} cores ({prof.time_us:.1f} "
                                f"us; the critical pipe is {prof.critical_pipe}, MTE2 busy "
                                f"{prof.pipe_ratio.get('mte2', 0):.0%}, Cube busy {prof.pipe_ratio.get('cube', 0):.0%}); "
                                f"the target is {REUSE_TARGET:.0%}.{extra} A bigger base_m x base_n reuses each loaded "
                                f"byte of B more, up to what L0C holds; a second buffer lets B's copies overlap the "
                                f"Mmads." + (f" {idle} of the {REUSE_CORES} blocks did (almost) nothing: give every block its own rows "
                                           f"of output tiles." if idle > 0 else ""))
    passed(name, f"{len(_REUSE_CASES)} hidden shapes, each row strip of A copied once; {tiling}: {u:.1%} Cube "
                 f"utilisation on {m}x{k}x{n} fp16, {REUSE_CORES} cores")
