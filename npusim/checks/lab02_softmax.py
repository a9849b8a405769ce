"""Checks of lab 02 (softmax on the vector unit): the online softmax, and sizing its tile from UB."""

from __future__ import annotations

import numpy as np

from ..config import a2
from ..errors import CapacityError, NpuSimError
from ..launch import launch
from ._core import CheckFailed, as_int, call_learner, case_rng, describe, fixed_rng, mismatch, passed, run_kernel
from ._flow import Skeleton
from ._work import require_work

__all__ = ["softmax", "softmax_tile"]

HINTS = {
    "softmax": (
        "reduce() is section 2's pattern: the vector unit writes, something makes the result visible, then "
        "the scalar unit reads. process_row() is section 3's formula: one pass over the chunks keeps m and s "
        "up to date, a second pass writes. Think about what m must be before the first chunk, and what a chunk "
        "that is all -inf does to it.",
        "reduce: run fn into the red buffer with tmp as its scratch, order the scalar unit after the vector "
        "unit (with which HardEvent?), then read element 0. Pass 1, per chunk: load it, take the new maximum, "
        "exponentiate the chunk shifted by it on the vector unit, and update s: the old sum rescaled to the new "
        "maximum plus the chunk's sum. Pass 2, per chunk: load it again, shift by the row's maximum, "
        "exponentiate, store it divided by the row's sum. Then follow your code through a row whose first chunk "
        "is all -inf, and a row that is -inf everywhere (its softmax is NaN, as in torch).",
        Skeleton(
            "class MySoftmax(MySoftmax):      # your class: its two methods\n"
            "    def reduce(self, fn, w, n: int) -> float:\n"
            "        red = self.red.get(ns.float32)\n"
            "        fn(red, w, self.tmp.get(ns.float32), n)\n"
            "        ___                      # the scalar unit may read only what the vector unit has written\n"
            "        return red.get_value(0)\n"
            "\n"
            "    def process_row(self, base: int) -> None:\n"
            "        m, s = ___\n"
            "        for off, n in self.chunks():\n"
            "            w = self.load(base, off, n)\n"
            "            m_new = ___\n"
            "            if ___:              # a chunk that leaves the maximum at -inf adds nothing\n"
            "                continue\n"
            "            ns.adds(w, w, -m_new, n)\n"
            "            ns.exp(w, w, n)\n"
            "            s = ___\n"
            "            m = m_new\n"
            "        for off, n in self.chunks():\n"
            "            w = self.load(base, off, n)\n"
            "            ns.adds(w, w, -m, n)\n"
            "            ns.exp(w, w, n)\n"
            "            self.store(base, off, n, w, ___)",
            call="check.softmax(softmax_kernel)", cells=("02_sof-356a192b", "02_sof-b1d57811")),
    ),
    "softmax-tile": (
        "The occupancy chart shows what the kernel reserves for a given tile. Work out how many bytes of UB "
        "each element of the tile costs, and what that allows within 192 KB. Does a short row need a big tile?",
        "Go through MySoftmax.__init__: every init_buffer that grows with the tile costs bytes per tile element "
        "(count the buffers of each queue, and the work and partial buffers, which are fp32); the ones that do "
        "not grow are a fixed cost. The largest tile is what is left of UB over the cost per element, kept to "
        "whole 512-byte chunks; a row shorter than that needs no more than itself (rounded up to 16).",
        Skeleton(
            "def choose_tile(cols: int, dtype) -> int:\n"
            "    itemsize = np.dtype(dtype).itemsize\n"
            "    per_element = ___     # UB bytes per tile element: every buffer of MySoftmax that grows with the tile\n"
            "    fixed = ___           # UB bytes that do not grow with the tile\n"
            "    largest = int((ns.a2.ub_bytes - fixed) / per_element) // 256 * 256\n"
            "    return ___            # and for a short row?",
            call="check.softmax_tile(choose_tile, softmax_kernel)", cells=("02_sof-356a192b", "02_sof-b1d57811")),
    ),
}


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


def _rows(kind: str, rows: int, cols: int, tile: int, dtype, rng) -> np.ndarray:
    """Hidden inputs by kind: each kind is a failure mode of an online softmax."""
    fp16 = np.dtype(dtype) == np.float16
    x = rng.standard_normal((rows, cols))
    if kind == "small values":
        pass
    elif kind == "max in a later chunk":      # every later chunk raises the maximum: s must be rescaled
        x = x + 8.0 * (np.arange(cols) // max(tile, 1))[None, :]
        x[:, -1] += 20.0
    elif kind == "only very negative values":  # a running max that starts at 0 underflows the sum
        x = x * 10 - (50_000.0 if fp16 else 1e6)
    elif kind == "-inf entries":
        x = x * 5
        x[:, ::3] = -np.inf
    elif kind == "masked first chunks":        # attention masks: the running maximum stays -inf for a while
        x = x * 5
        for r in range(rows):                   # row r: its first r + 1 chunks masked, never the whole row
            x[r, :min((r + 1) * tile, cols - 1)] = -np.inf
    elif kind == "a fully masked row":         # no softmax exists: NaN, as torch.softmax gives
        x = x * 5
        if rows > 1:                            # and a row beside it whose first chunk is masked
            x[0, :min(tile, cols - 1)] = -np.inf
        x[rows // 2, :] = -np.inf
    elif kind == "huge values":                # exp overflows unless the maximum is subtracted
        x = np.clip(x * 15_000.0, -60_000.0, 60_000.0) if fp16 else x * 1e30
    else:  # "wide range"
        x = x * 30
    return x.astype(dtype)


# (kind, rows, cols, tile, dtype): the failure modes first, then lengths on both sides of every boundary
_FIXED = [
    ("small values", 2, 100, 256, np.float32), ("small values", 3, 1, 256, np.float16),
    ("max in a later chunk", 2, 1000, 256, np.float32), ("max in a later chunk", 3, 2049, 512, np.float16),
    ("only very negative values", 2, 700, 256, np.float16), ("only very negative values", 2, 300, 256, np.float32),
    ("-inf entries", 2, 1000, 256, np.float16), ("masked first chunks", 2, 600, 256, np.float16),
    ("masked first chunks", 3, 3000, 1024, np.float32), ("a fully masked row", 3, 700, 256, np.float16),
    ("a fully masked row", 2, 100, 256, np.float32), ("huge values", 2, 3000, 1024, np.float16),
    ("huge values", 2, 600, 256, np.float32),
    *[("wide range", 2, c, 256, np.float16) for c in (15, 16, 17, 255, 256, 257, 513)],
    ("wide range", 1, 10_001, 2048, np.float32), ("wide range", 4, 4096, 4096, np.float16),
]


def _cases() -> list[tuple]:
    rng = case_rng("softmax", "random")
    out = list(_FIXED)
    kinds = ["small values", "max in a later chunk", "only very negative values", "-inf entries",
             "masked first chunks", "a fully masked row", "huge values", "wide range"]
    for _ in range(3):
        dt = (np.float16, np.float32)[int(rng.integers(2))]
        tile = 16 * int(rng.integers(16, 257))
        out.append((kinds[int(rng.integers(len(kinds)))], int(rng.integers(1, 4)), int(rng.integers(1, 6 * tile)),
                    tile, dt))
    return out


def _causes(kind: str, got: np.ndarray, want: np.ndarray, cols: int, tile: int) -> str:
    """Likely causes, from the kind of input and what is wrong in the output."""
    bad_nan = ~np.isfinite(got) & np.isfinite(want)
    chunks = -(-cols // tile)
    masked_rows = np.flatnonzero(np.isnan(want).all(axis=1))
    if masked_rows.size and not np.isnan(got[masked_rows]).all():
        return (f"Row {masked_rows[0]} is -inf everywhere (a fully masked attention row): it has no softmax, and "
                f"like torch.softmax the output is NaN there. Rows with at least one finite value must stay exact.")
    if kind in ("masked first chunks", "a fully masked row") and bad_nan.any():
        rows = np.flatnonzero(bad_nan.any(axis=1))
        return (f"Rows {', '.join(map(str, rows))} start with whole chunks of -inf (a masked attention row) and "
                f"have finite values later; {int(bad_nan.sum()):,} outputs are NaN. While the running maximum is "
                f"still -inf, exp(x - m_new) is exp(-inf - (-inf)) = NaN for such a chunk, and so is "
                f"exp(m - m_new): a chunk that raises nothing above -inf must add nothing to the sum.")
    if bad_nan.any():
        if kind in ("small values", "wide range", "max in a later chunk") and np.abs(want).max() <= 1:
            return ("The output holds inf or NaN although these inputs are small, so exp did not overflow: "
                    "it is 0 x inf or inf - inf in the running statistics. At the first chunk the old maximum is "
                    "-inf: the rescale factor exp(m_old - m_new) is then 0 (at most 1 ever); the other way round "
                    "it is inf.")
        if kind == "only very negative values":
            return ("Every value of these rows is far below 0. If the running maximum starts at 0 (instead of "
                    "-inf), exp(x - 0) underflows to 0, the sum is 0 and 1/s is inf.")
        if kind == "huge values":
            return "exp overflowed: subtract the running maximum from every chunk before exp."
        if kind == "-inf entries":
            return ("-inf inputs must give 0 (exp(-inf - m) = 0); NaN comes from -inf - (-inf) or 0 x inf: "
                    "look at the maximum you subtract and the rescale factor.")
        return "Look at where inf or NaN can appear: exp of a large number, 0 x inf, inf - inf, 1 / 0."
    bad = ~np.isclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-4)
    if chunks > 1:
        cols_bad = np.flatnonzero(bad.any(axis=0))
        first_chunk_only = cols_bad.size and cols_bad.max() < tile
        if kind == "max in a later chunk":
            return ("In these rows every chunk raises the maximum. When it grows from m_old to m_new, the sum of "
                    "the earlier chunks was computed with m_old and must be rescaled by exp(m_old - m_new); pass 2 "
                    "must use the final maximum and sum of the whole row.")
        if first_chunk_only:
            return "Only the first chunk's columns are wrong: look at pass 2's first chunk."
        return ("Rows longer than the tile are wrong: every chunk of pass 2 must use the maximum and the sum of "
                "the WHOLE row, computed by pass 1.")
    ratio = got[bad].astype(np.float64) / np.where(want[bad] == 0, np.nan, want[bad])
    if ratio.size and np.nanstd(ratio) < 1e-3 * max(1.0, abs(np.nanmean(ratio))):
        return (f"Every wrong value is {np.nanmean(ratio):.4g} times the right one: the division by the sum "
                f"(store's factor) is off.")
    return "Look at the shift by the maximum and the division by the sum."


def _check_gm_reads(name: str, run, x: np.ndarray, case: dict) -> None:
    read = run.profile.path_bytes.get("GM->UB", 0)
    rows, cols = x.shape
    row_bytes = -(-cols * x.dtype.itemsize // 32) * 32
    if read > 2 * rows * row_bytes:
        raise CheckFailed(name, f"correct on [{describe(case)}], but your kernel read {read:,} B from GM for "
                                f"{x.nbytes:,} B of input: {read / x.nbytes:.1f} times the rows. An online "
                                f"softmax reads each row twice (maximum and sum together in pass 1, then pass 2); "
                                f"computing the maximum and the sum in separate passes reads it three times.")


def softmax(kernel) -> None:
    """Lab 02, exercise 1: ``kernel(x, y, rows, cols, tile)`` writes the row-wise softmax of ``x`` into
    ``y``: finite and accurate for maxima in later chunks, only very negative rows, -inf entries, rows whose
    first chunks are all -inf (exact), huge values and every length; NaN for a row that is -inf everywhere
    (as ``torch.softmax``); reading each row from GM at most twice."""
    __tracebackhide__ = True
    name = "softmax"
    cases = _cases()
    explain = {OverflowError: "math.exp overflowed: the rescale factor exp(m_old - m_new) is never above 1; "
                              "is it the other way round?",
               ZeroDivisionError: "A sum or a factor on the scalar unit became 0: exp of a very negative number "
                                  "underflows to 0. Shift by the maximum before exp (and start it at -inf)."}
    masked = {**explain, ZeroDivisionError: "The sum of a row that is -inf everywhere is 0 (a fully masked "
                                            "attention row): its softmax does not exist; write NaN for it, as "
                                            "torch.softmax does."}
    for i, (kind, rows, cols, tile, dt) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_FIXED) else case_rng(name, i)
        x = _rows(kind, rows, cols, tile, dt, rng)
        y = np.full_like(x, np.nan)
        case = {"values": kind, "rows": rows, "cols": cols, "tile": tile, "dtype": np.dtype(dt).name}
        # auto_sync=False: the exercise writes the V -> S flag by hand, so a missing one must be caught
        run = run_kernel(name, kernel, 1, x, y, rows, cols, tile, case=case, auto_sync=False,
                         explain=masked if kind == "a fully masked row" else explain)
        want = _softmax_ref(x)
        fp16 = np.dtype(dt) == np.float16
        mm = mismatch(y, want, rtol=2e-3 if fp16 else 1e-4, atol=1e-4 if fp16 else 1e-7)
        if mm is not None:
            raise CheckFailed(name, f"on [{describe(case)}] {mm.where()}; {mm.example()}. "
                                    + _causes(kind, y, want, cols, tile))
        # every element in and out through UB, and every finite one exponentiated (in fp32) on the vector unit
        require_work(name, run.profile, case, moved={"GM->UB": x.nbytes, "UB->GM": x.nbytes},
                     ops={"exp": 4 * int(np.isfinite(x).sum())},
                     how="the chunks copied in, ns.exp on the vector unit, copied out")
        if cols > tile:
            _check_gm_reads(name, run, x, case)
    passed(name, f"{len(cases)} hidden inputs (maxima in later chunks, very negative rows, -inf, masked chunks and "
                 f"rows, huge values, "
                 f"lengths around every boundary, fp16 and fp32), each row read at most twice")


SPEED_MARGIN = 1.05
_TILE_CASES = [(100, np.float16), (3000, np.float32), (40_000, np.float16), (100_000, np.float16),
               (30_000, np.float32)]


def _fastest(kernel, x: np.ndarray) -> tuple[int, float]:
    """(tile, us) of the fastest tile that fits among the largest 512 B multiple that fits, a few powers of
    two and the row length itself."""
    cols, isz = x.shape[1], x.dtype.itemsize
    times = {}
    for t in range(a2.ub_bytes // (4 * isz + 4) // 256 * 256, 0, -256):  # down to the largest that fits
        if (s := _time(kernel, x, t)) is not None:
            times[t] = s
            break
    largest = max(times, default=0)
    for t in (1024, 2048, 4096, 8192, -(-cols // 16) * 16):
        if t < largest and t not in times and (s := _time(kernel, x, t)) is not None:
            times[t] = s
    best = min(times, key=times.get)
    return best, times[best]


def _time(kernel, x, tile) -> float | None:
    try:
        return launch(kernel, 1, x, np.empty_like(x), x.shape[0], x.shape[1], tile).profile.time_us
    except CapacityError:
        return None


def _tile_of(name: str, choose, cols: int, dt) -> int:
    return as_int(name, call_learner(name, choose, cols, dt), f"choose_tile({cols}, {np.dtype(dt).name})")


def _check_tile(name: str, choose, kernel, cols: int, dt, what: str) -> None:
    tile = _tile_of(name, choose, cols, dt)
    x = (fixed_rng(name, cols).standard_normal((2, cols)) * 5).astype(dt)
    case = {"rows": what, "cols": cols, "dtype": np.dtype(dt).name, "your tile": tile}
    if tile < 16:
        raise CheckFailed(name, f"for [{describe(case)}] the tile must be at least 16 elements")
    try:
        mine = launch(kernel, 1, x, np.empty_like(x), 2, cols, tile).profile.time_us
    except CapacityError as e:
        raise CheckFailed(name, f"for [{describe(case)}] your kernel does not fit UB: it asks for "
                                f"{e.facts.get('requested', 0) + e.facts.get('used', 0):,} B of "
                                f"{a2.ub_bytes:,} B. Count every init_buffer of MySoftmax per tile "
                                f"element.") from None
    except NpuSimError:
        run_kernel(name, kernel, 1, x, np.empty_like(x), 2, cols, tile, case=case)  # the learner-facing error
        raise
    best, best_us = _fastest(kernel, x)
    if mine > SPEED_MARGIN * best_us:
        # the way to go, never the passing value
        way = ("a longer tile is faster" if best > tile else "a shorter tile is faster")
        chunks = -(-cols // tile)
        raise CheckFailed(name, f"for [{describe(case)}] your kernel takes {mine:.2f} us, "
                                f"{mine / best_us - 1:.1%} longer than with the fastest tile that fits (the target: "
                                f"within {SPEED_MARGIN - 1:.0%}): {way}. Your tile makes "
                                f"{chunks} chunk{'s' if chunks > 1 else ''} per row, and every chunk pays two "
                                f"reductions, two V -> S round trips and DMA start-ups"
                                + (f"; a row of {cols} elements fits fewer chunks in UB." if best > tile else "."))


def softmax_tile(choose, kernel) -> None:
    """Lab 02, exercise 2: ``choose(cols, dtype) -> tile`` fits UB with the learner's ``kernel`` and makes it
    within 5 % of the fastest tile that fits, on short and long rows, fp16 and fp32, and on a row just
    longer than the learner's own tile for long rows (where a constant tile makes a needless extra chunk)."""
    __tracebackhide__ = True
    name = "softmax_tile"
    rng = case_rng(name, "random")
    cases = _TILE_CASES + [(int(rng.integers(1000, 80_000)), (np.float16, np.float32)[int(rng.integers(2))])]
    for cols, dt in cases:
        _check_tile(name, choose, kernel, cols, dt, "short and long rows")
    for dt in (np.float16, np.float32):
        # a row 16 elements longer than the learner's tile for long rows: a constant tile makes a second chunk
        # of 16 elements where one chunk fits UB (the fastest tile is then the row itself)
        cols = _tile_of(name, choose, 100_000, dt) + 16
        probe = np.zeros((2, cols), dt)
        if _time(kernel, probe, -(-cols // 16) * 16) is not None:
            _check_tile(name, choose, kernel, cols, dt, "16 elements longer than your tile for long rows")
            cases.append((cols, dt))
    passed(name, f"{len(cases)} row lengths (short and long, fp16 and fp32): every tile fits UB and is within "
                 f"{SPEED_MARGIN - 1:.0%} of the fastest")
