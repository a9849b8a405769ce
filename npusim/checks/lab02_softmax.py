"""Checks of lab 02 (softmax on the vector unit): the online softmax, and sizing its tile from UB."""

from __future__ import annotations

import numpy as np

from ..config import a2
from ..errors import CapacityError, NpuSimError
from ..launch import launch
from ._core import CheckFailed, as_int, call_learner, case_rng, describe, fixed_rng, mismatch, passed, run_kernel

__all__ = ["softmax", "softmax_tile"]

HINTS = {
    "softmax": (
        "reduce() is section 2's pattern: the vector unit writes, a flag makes the result visible, then the "
        "scalar unit reads. process_row() is section 3's formula: one pass over the chunks that keeps m and s "
        "up to date, then one pass that writes. Think about what m must be before the first chunk.",
        "reduce: red = self.red.get(ns.float32); fn(red, w, self.tmp.get(ns.float32), n); then a V -> S "
        "set_flag / wait_flag pair; then return red.get_value(0). process_row, pass 1: start with m = -inf "
        "(so that exp(m - m_new) = 0 for the first chunk) and s = 0; for each chunk: load it, m_new = the larger "
        "of m and the chunk's max, w = exp(w - m_new) on the vector unit, s = s * exp(m - m_new) + sum(w), "
        "m = m_new. Pass 2: load each chunk again, w = exp(w - m), store it scaled by 1 / s.",
        "m, s = -math.inf, 0.0\n"
        "for off, n in self.chunks():\n"
        "    w = self.load(base, off, n)\n"
        "    m_new = max(m, self.reduce(___, w, n))\n"
        "    ns.adds(w, w, ___, n); ns.exp(w, w, n)\n"
        "    s = s * math.exp(___) + self.reduce(___, w, n)\n"
        "    m = m_new\n"
        "for off, n in self.chunks():\n"
        "    w = self.load(base, off, n); ns.adds(w, w, ___, n); ns.exp(w, w, n)\n"
        "    self.store(base, off, n, w, ___)",
    ),
    "softmax-tile": (
        "The occupancy chart shows what the kernel reserves for a given tile. Work out how many bytes of UB "
        "each element of the tile costs, and what that allows within 192 KB. Do short rows need a big tile?",
        "Add up MySoftmax.__init__'s init_buffer calls per tile element: two input and two output buffers of "
        "itemsize bytes, the fp32 work buffer, the reduction partials (4 bytes per 64 elements), plus the "
        "32-byte result buffer (and each buffer rounds up to 32 B). The largest tile that fits is the UB size "
        "over that; chunks that start on 512-byte boundaries copy fastest. A row shorter than that needs only "
        "its own length (rounded up to 16).",
        "per_element = 2 * itemsize + 2 * itemsize + 4 + 4 / 64\n"
        "largest = int((UB_BYTES - ___) / per_element) // ___ * ___\n"
        "return min(largest, ___)",
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
    ("-inf entries", 2, 1000, 256, np.float16), ("huge values", 2, 3000, 1024, np.float16),
    ("huge values", 2, 600, 256, np.float32),
    *[("wide range", 2, c, 256, np.float16) for c in (15, 16, 17, 255, 256, 257, 513)],
    ("wide range", 1, 10_001, 2048, np.float32), ("wide range", 4, 4096, 4096, np.float16),
]


def _cases() -> list[tuple]:
    rng = case_rng("softmax", "random")
    out = list(_FIXED)
    kinds = ["small values", "max in a later chunk", "only very negative values", "-inf entries",
             "huge values", "wide range"]
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
    ``y``: finite and accurate for maxima in later chunks, only very negative rows, -inf entries, huge
    values and every length, reading each row from GM at most twice."""
    __tracebackhide__ = True
    name = "softmax"
    cases = _cases()
    explain = {OverflowError: "math.exp overflowed: the rescale factor exp(m_old - m_new) is never above 1; "
                              "is it the other way round?",
               ZeroDivisionError: "A sum or a factor on the scalar unit became 0: exp of a very negative number "
                                  "underflows to 0. Shift by the maximum before exp (and start it at -inf)."}
    for i, (kind, rows, cols, tile, dt) in enumerate(cases):
        rng = fixed_rng(name, i) if i < len(_FIXED) else case_rng(name, i)
        x = _rows(kind, rows, cols, tile, dt, rng)
        y = np.full_like(x, np.nan)
        case = {"values": kind, "rows": rows, "cols": cols, "tile": tile, "dtype": np.dtype(dt).name}
        # auto_sync=False: the exercise writes the V -> S flag by hand, so a missing one must be caught
        run = run_kernel(name, kernel, 1, x, y, rows, cols, tile, case=case, explain=explain, auto_sync=False)
        want = _softmax_ref(x)
        fp16 = np.dtype(dt) == np.float16
        mm = mismatch(y, want, rtol=2e-3 if fp16 else 1e-4, atol=1e-4 if fp16 else 1e-7)
        if mm is not None:
            raise CheckFailed(name, f"on [{describe(case)}] {mm.where()}; {mm.example()}. "
                                    + _causes(kind, y, want, cols, tile))
        if cols > tile:
            _check_gm_reads(name, run, x, case)
    passed(name, f"{len(cases)} hidden inputs (maxima in later chunks, very negative rows, -inf, huge values, "
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


def softmax_tile(choose, kernel) -> None:
    """Lab 02, exercise 2: ``choose(cols, dtype) -> tile`` fits UB with the learner's ``kernel`` and makes it
    within 5 % of the fastest tile that fits, on short and long rows, fp16 and fp32."""
    __tracebackhide__ = True
    name = "softmax_tile"
    rng = case_rng(name, "random")
    cases = _TILE_CASES + [(int(rng.integers(1000, 80_000)), (np.float16, np.float32)[int(rng.integers(2))])]
    for cols, dt in cases:
        tile = as_int(name, call_learner(name, choose, cols, dt), f"choose_tile({cols}, {np.dtype(dt).name})")
        x = (fixed_rng(name, cols).standard_normal((2, cols)) * 5).astype(dt)
        case = {"cols": cols, "dtype": np.dtype(dt).name, "your tile": tile}
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
            raise CheckFailed(name, f"for [{describe(case)}] your kernel takes {mine:.1f} us; with tile={best} "
                                    f"(the fastest that fits) it takes {best_us:.1f} us, "
                                    f"{mine / best_us:.2f}x faster: your tile makes "
                                    f"{-(-cols // tile)} chunks per row where {-(-cols // best)} would do, and "
                                    f"every chunk pays two reductions, two V -> S round trips and DMA start-ups.")
    passed(name, f"{len(cases)} row lengths (short and long, fp16 and fp32): every tile fits UB and is within "
                 f"{SPEED_MARGIN - 1:.0%} of the fastest")
