"""Checks of lab 01 (vector add): the tiled kernel, reaching the roofline, and the multi-core split."""

from __future__ import annotations

import numpy as np

from ..config import a2
from ..errors import CapacityError, NpuSimError
from ..launch import launch
from ..tracebacks import site
from ._core import (CheckFailed, Mismatch, as_int, call_learner, case_rng, compare, describe, fixed_rng, passed,
                    run_kernel)
from ._flow import Skeleton
from ._work import require_work

__all__ = ["vector_add", "vector_add_fast", "block_range"]

HINTS = {
    "vector-add": (
        "Your class is the single-tile example of section 1 cut into methods, which process() calls once per "
        "tile. Which lines of add_one_tile belong to __init__, which to copy_in, compute and copy_out? What "
        "changes when a tile is not the first one, or is shorter than the others?",
        "__init__ builds the pipe and three queues (two VECIN, one VECOUT) and gives each one its buffers with "
        "pipe.init_buffer (how many, and how many bytes each?). process() walks the vector tile by tile and "
        "hands every stage the tile's offset and its element count. Each stage takes its tensors from a queue "
        "(alloc_tensor, or deque from the stage before) and gives each one back (enque to the next stage, or "
        "free_tensor once it is used). copy() moves count elements between GM and UB: data_copy for whole "
        "32 B blocks, data_copy_pad otherwise.",
        Skeleton(
            "class MyKernelAdd:\n"
            "    def __init__(self, x, y, z, length: int, tile: int, buffer_num: int):\n"
            "        self.x, self.y, self.z = x, y, z\n"
            "        self.length, self.tile, self.dtype = length, tile, x.dtype\n"
            "        self.pipe = ns.TPipe()\n"
            "        self.in_x, self.in_y = ns.TQue(ns.TPosition.VECIN), ns.TQue(ns.TPosition.VECIN)\n"
            "        self.out_z = ns.TQue(ns.TPosition.VECOUT)\n"
            "        for q in (self.in_x, self.in_y, self.out_z):\n"
            "            self.pipe.init_buffer(q, ___, ___)      # how many buffers, of how many BYTES\n"
            "\n"
            "    def process(self) -> None:\n"
            "        for offset in range(0, self.length, self.tile):\n"
            "            count = ___                              # the last tile can be shorter\n"
            "            self.copy_in(offset, count)\n"
            "            self.compute(count)\n"
            "            self.copy_out(offset, count)\n"
            "\n"
            "    def copy_in(self, offset: int, count: int) -> None:\n"
            "        x_local = self.in_x.alloc_tensor(self.dtype)\n"
            "        y_local = self.in_y.alloc_tensor(self.dtype)\n"
            "        self.copy(x_local, ___, count)\n"
            "        self.copy(y_local, ___, count)\n"
            "        ___                                          # hand both tiles to compute\n"
            "\n"
            "    def compute(self, count: int) -> None:\n"
            "        x_local, y_local = self.in_x.deque(), self.in_y.deque()\n"
            "        z_local = self.out_z.alloc_tensor(self.dtype)\n"
            "        ns.add(z_local, x_local, y_local, count)\n"
            "        ___                                          # hand z on; x's and y's buffers are free again\n"
            "\n"
            "    def copy_out(self, offset: int, count: int) -> None:\n"
            "        z_local = self.out_z.deque()\n"
            "        self.copy(___, z_local, count)\n"
            "        self.out_z.free_tensor(z_local)\n"
            "\n"
            "    def copy(self, dst, src, count: int) -> None:\n"
            "        if (count * self.dtype.itemsize) % 32 == 0:\n"
            "            ns.data_copy(dst, src, count)\n"
            "        else:\n"
            "            ns.data_copy_pad(dst, src, count)",
            call="check.vector_add(add_kernel)", cells=("01_vec-356a192b", "01_vec-c1dfd96e")),
    ),
    "vector-add-fast": (
        "Section 4 measured what a copy costs. Which cost does a longer tile pay less often, and which tile "
        "lengths avoid the slow, misaligned GM requests? Section 3 showed what a second buffer hides.",
        "Take the number of buffers that lets the stages overlap. Then the longest tile your kernel can "
        "reserve: add up what MyKernelAdd reserves in UB per tile element (every queue, every buffer, in "
        "bytes), divide UB by it, and keep the tile's bytes a multiple of 512. The check's message says which "
        "way to go when you miss.",
        Skeleton(
            "def fast_settings() -> tuple[int, int]:\n"
            "    buffer_num = ___\n"
            "    ub_per_element = ___        # UB bytes one tile element costs your kernel: every queue, every buffer\n"
            "    tile = int(ns.a2.ub_bytes // ub_per_element) // ___ * ___    # the longest that fits, whole 512 B\n"
            "    return tile, buffer_num",
            call="check.vector_add_fast(add_kernel, fast_settings)", cells=("01_vec-356a192b", "01_vec-c1dfd96e")),
    ),
    "block-range": (
        "Cut [0, total) into parts the way a grid of cores would: an equal share each, then make every share a "
        "whole number of 512-byte chunks so that every part starts aligned. What does a block get that starts "
        "past the end?",
        "Work in elements. First the equal share, rounded the way that makes the shares cover everything; then "
        "that share rounded to whole 512-byte chunks of elements of this itemsize. Block b's part starts b "
        "shares in; near the end a part is shorter, and a block whose start is past the end gets nothing.",
        Skeleton(
            "def my_block_range(total: int, itemsize: int, block: int, blocks: int) -> tuple[int, int]:\n"
            "    align = ___          # elements in 512 bytes\n"
            "    per = ___            # an equal share, rounded so that the shares cover [0, total) ...\n"
            "    per = ___            # ... then to whole 512-byte chunks\n"
            "    start = ___          # never past the end\n"
            "    return start, ___    # never negative",
            call="check.block_range(my_block_range, add_kernel_multi)",
            cells=("01_vec-356a192b", "01_vec-c1dfd96e", "01_vec-block")),
    ),
}

UB_BYTES = a2.ub_bytes

# (total, tile, block_dim, buffer_num, dtype): one element, less than a 32 B block, exactly one block, an exact
# multiple of the tile, a tail of one, an fp32 tail that is not whole 32 B, a tile longer than the vector, the
# largest tiles that fit (fp16 with one buffer, fp32 with two), several blocks, blocks with nothing to do
_ADD_FIXED = [
    (1, 256, 1, 1, np.float16), (15, 256, 1, 2, np.float16), (16, 16, 1, 1, np.float16),
    (4096, 1024, 1, 2, np.float16), (4097, 1024, 1, 2, np.float16), (1003, 256, 1, 2, np.float32),
    (100, 4096, 1, 1, np.float16), (65_539, 32_768, 1, 1, np.float16), (20_000, 8192, 1, 2, np.float32),
    (100_003, 4096, 3, 2, np.float16), (1000, 512, 8, 2, np.float16),
]


def _max_tile(dtype, buffer_num: int) -> int:
    return UB_BYTES // (3 * buffer_num * np.dtype(dtype).itemsize) // 16 * 16


def _add_cases() -> list[tuple]:
    rng = case_rng("vector_add", "random")
    out = list(_ADD_FIXED)
    for _ in range(4):
        dt = (np.float16, np.float32)[int(rng.integers(2))]
        bufs = int(rng.integers(1, 3))
        tile = 16 * int(rng.integers(1, _max_tile(dt, bufs) // 16 + 1))
        out.append((int(rng.integers(1, 50_000)), tile, int(rng.integers(1, 5)), bufs, dt))
    return out


def _inputs(total: int, dtype, rng) -> tuple[np.ndarray, np.ndarray]:
    x = (rng.standard_normal(total) * 100).astype(dtype)
    y = (rng.standard_normal(total) * 100).astype(dtype)
    return x, y


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _add_causes(z: np.ndarray, x: np.ndarray, y: np.ndarray, total: int, tile: int, block_dim: int):
    """Likely causes of a wrong z, from which elements are wrong and what they hold."""

    def causes(mm: Mismatch) -> str:
        for what, value in (("x + x", x + x), ("y + y", y + y), ("x", x), ("y", y)):
            if _same(z, value):
                src = {"x + x": "y's tile is copied from x (or x is used twice in the add)",
                       "y + y": "x's tile is copied from y (or y is used twice in the add)",
                       "x": "z holds x: the sum is not what copy_out writes (or add's destination)",
                       "y": "z holds y: the sum is not what copy_out writes (or add's destination)"}[what]
                return f"Every element of z equals {what}: {src}."
        if block_dim == 1 and total % tile and mm.only_in(total - total % tile, total):
            return (f"Only the last tile (elements {total - total % tile} to {total - 1}, {total % tile} of them, "
                    f"shorter than tile={tile}) is wrong: look at how process() cuts the last tile and how its "
                    f"count reaches every stage.")
        if mm.never_written == mm.count and mm.count == mm.size:
            return "Nothing was written to z: does copy_out copy the result to GM?"
        if mm.first >= tile and block_dim == 1:
            return (f"The first {mm.first} elements are right; from element {mm.first} (tile "
                    f"{mm.first // tile}, position {mm.first % tile} in it) on they are not: look at how the "
                    f"offset moves from one tile to the next.")
        if mm.never_written:
            return "Some elements were never written: does every tile reach copy_out, with its own offset?"
        return "Look at which input tile each stage reads and which output position copy_out writes."

    return causes


def _require_add_work(name: str, profile, x: np.ndarray, case: dict) -> None:
    """x and y in, z out through UB, and the add on the vector unit: every element of each."""
    require_work(name, profile, case, moved={"GM->UB": 2 * x.nbytes, "UB->GM": x.nbytes}, ops={"add": x.nbytes},
                 how="data_copy in, ns.add, data_copy out")


def _check_adds(name: str, kernel, cases) -> None:
    for i, (total, tile, bd, bufs, dt) in enumerate(cases):
        case = {"total": total, "tile": tile, "block_dim": bd, "buffer_num": bufs, "dtype": np.dtype(dt).name}
        x, y = _inputs(total, dt, fixed_rng(name, i) if i < len(_ADD_FIXED) else case_rng(name, i))
        z = np.full_like(x, np.nan)
        run = run_kernel(name, kernel, bd, x, y, z, total, tile, bufs, case=case)
        compare(name, z, x + y, case, causes=_add_causes(z, x, y, total, tile, bd))
        _require_add_work(name, run.profile, x, case)


def _no_overlap_cause(one, two) -> str:
    """Why two buffers per queue did not overlap the stages, from the two profiles: the UB the kernel reserved
    (did buffer_num reach init_buffer?), then what serialised the pipes (barriers)."""
    ub1, ub2 = one.reserved_bytes.get("UB", 0), two.reserved_bytes.get("UB", 0)
    if ub2 <= ub1:
        return (f"Your kernel reserves {ub1:,} B of UB with buffer_num=1 and {ub2:,} B with buffer_num=2: "
                f"__init__ does not give each queue buffer_num buffers (pipe.init_buffer's second argument).")
    barriers = [r for r in two.raw_records if str(r[4]).startswith("pipe_barrier")]
    if barriers:
        return (f"It reserves the second buffers ({ub2:,} B of UB against {ub1:,} B), but issues "
                f"{len(barriers):,} pipe_barrier calls (the first at {site(*barriers[0][6])}): each makes "
                f"every pipe wait for all the work issued before it, so tile i + 1's copy-in cannot start while "
                f"tile i is computed or copied out. The queues already order the stages (enque/deque): drop the "
                f"barriers.")
    return (f"It reserves the second buffers ({ub2:,} B of UB against {ub1:,} B), yet the stages do not overlap: "
            f"look at what makes one stage wait for another (flags, or a stage that deques before the previous "
            f"tile is enqueued).")


def vector_add(kernel) -> None:
    """Lab 01, exercise 1: ``kernel(x, y, z, total, tile, buffer_num)`` computes ``z = x + y`` on hidden
    sizes (tails, one element, the largest tiles, several blocks, fp16 and fp32), and ``buffer_num`` buffers
    overlap the stages."""
    __tracebackhide__ = True
    name = "vector_add"
    cases = _add_cases()
    _check_adds(name, kernel, cases)
    # two buffers must overlap CopyIn with Compute/CopyOut: measurably faster than one
    x, y = _inputs(1 << 16, np.float16, fixed_rng(name, "buffers"))
    times = {}
    for bufs in (1, 2):
        case = {"total": x.size, "tile": 4096, "buffer_num": bufs, "dtype": "float16"}
        times[bufs] = run_kernel(name, kernel, 1, x, y, np.empty_like(x), x.size, 4096, bufs, case=case).profile
    if times[2].total_cycles > 0.99 * times[1].total_cycles:
        raise CheckFailed(name, f"correct, but buffer_num has no effect: with 1 and 2 buffers per queue your kernel "
                                f"takes {times[1].time_us:.1f} and {times[2].time_us:.1f} us on 65,536 fp16 elements "
                                f"(tile 4096). " + _no_overlap_cause(times[1], times[2]))
    passed(name, f"{len(cases)} hidden inputs (tails, one element, the largest tiles, several blocks, fp16 and "
                 f"fp32); two buffers {times[1].total_cycles / times[2].total_cycles:.2f}x faster than one")


TARGET_ROOFLINE = 0.84
FAST_TOTAL = 1 << 20


def _settings(name: str, settings) -> tuple[int, int]:
    got = call_learner(name, settings) if callable(settings) else settings
    if not (isinstance(got, tuple) and len(got) == 2):
        raise CheckFailed(name, f"fast_settings() must return a tuple (tile, buffer_num), got {got!r}")
    tile = as_int(name, got[0], "the tile")
    bufs = as_int(name, got[1], "buffer_num")
    if tile < 1 or bufs < 1:
        raise CheckFailed(name, f"tile and buffer_num must be positive, got ({tile}, {bufs})")
    return tile, bufs


def _efficiency(kernel, x, y, tile: int, bufs: int) -> float | None:
    try:
        return launch(kernel, 1, x, y, np.empty_like(x), x.size, tile, bufs).profile.roofline_efficiency
    except NpuSimError:
        return None


def _miss_causes(kernel, x, y, tile: int, bufs: int, prof) -> str:
    """What held the kernel back, measured: the start-up share, and which way to go (an aligned tile, two
    buffers, a longer tile), each measured on the learner's kernel; never the setting that passes."""
    cfg = prof.config
    copies = [i for i in prof.instructions if i.pipe.name == "MTE2"]
    busy = sum(i.end - i.start for i in copies) or 1.0
    startup = len(copies) * cfg.gm_startup_cycles / busy
    lines = [f"Your {len(copies):,} copy-in instructions spend {startup:.0%} of MTE2's busy time on DMA start-ups."]
    tries = []
    if (tile * 2) % 512:
        t = max(256, tile // 256 * 256)
        tries.append(("a tile whose bytes are a multiple of 512 B (every copy starts aligned)", t, bufs))
    if bufs == 1 and 3 * 2 * tile * 2 <= UB_BYTES:
        tries.append(("two buffers per queue", tile, 2))
    longest = UB_BYTES // (3 * max(bufs, 2) * 2) // 256 * 256
    if longest > tile:
        tries.append(("a longer tile (fewer start-ups), up to what UB holds", longest, max(bufs, 2)))
    best = prof.roofline_efficiency
    for what, t, b in tries:   # in the order of the evidence: alignment, buffers, length
        e = _efficiency(kernel, x, y, t, b)
        if e is not None and e > best + 0.005:   # each only if it helps beyond the ones before
            lines.append(f"Measured on your kernel, {what} helps.")
            best = e
    return " ".join(lines)


def vector_add_fast(kernel, settings) -> None:
    """Lab 01, exercise 2: with ``settings() -> (tile, buffer_num)``, the learner's ``kernel`` is correct and
    reaches 84 % of the GM roofline on 1,048,576 fp16 elements on one core."""
    __tracebackhide__ = True
    name = "vector_add_fast"
    tile, bufs = _settings(name, settings)
    x, y = _inputs(FAST_TOTAL, np.float16, fixed_rng(name, "big"))
    z = np.full_like(x, np.nan)
    case = {"total": FAST_TOTAL, "tile": tile, "buffer_num": bufs, "dtype": "float16"}
    try:
        prof = launch(kernel, 1, x, y, z, x.size, tile, bufs).profile
    except CapacityError as e:
        raise CheckFailed(name, f"tile={tile} with {bufs} buffer(s) does not fit: {e.facts.get('memory', 'UB')} "
                                f"has {e.facts.get('capacity', UB_BYTES):,} B and your kernel asks for more. Every "
                                f"queue reserves buffer_num x tile x 2 bytes. The simulator said:\n{e}") from None
    except Exception:  # noqa: BLE001 - run it again the checked way: the learner sees the translated error
        prof = run_kernel(name, kernel, 1, x, y, z, x.size, tile, bufs, case=case).profile
    _check_adds(name, kernel, [(4097, tile, 1, bufs, np.float16), (3 * tile + 5, tile, 1, bufs, np.float16)])
    compare(name, z, x + y, case)
    _require_add_work(name, prof, x, case)
    eff = prof.roofline_efficiency
    if eff < TARGET_ROOFLINE:
        raise CheckFailed(name, f"correct, but with tile={tile} and {bufs} buffer(s) your kernel takes "
                                f"{prof.time_us:.1f} us = {eff:.1%} of the GM roofline "
                                f"({a2.cycles_to_us(prof.roofline_cycles):.1f} us); the target is "
                                f"{TARGET_ROOFLINE:.0%}. " + _miss_causes(kernel, x, y, tile, bufs, prof))
    passed(name, f"tile={tile}, buffer_num={bufs}: {eff:.1%} of the roofline ({prof.time_us:.1f} us)")


# --- exercise 3: the multi-core split ---------------------------------------------------------------------

_SPLIT_FIXED = [  # (total, itemsize, blocks): one element, one block, tails, more blocks than data, 24 cores
    (1, 2, 1), (1, 2, 4), (256, 2, 1), (257, 2, 2), (1000, 2, 8), (100_003, 2, 3), (20_000, 4, 8),
    (65536 * 3 + 17, 2, 24), (5, 4, 24), (4096, 1, 3),
]


def _split_cases() -> list[tuple[int, int, int]]:
    rng = case_rng("block_range", "random")
    return list(_SPLIT_FIXED) + [(int(rng.integers(1, 1_000_000)), int((1, 2, 4)[rng.integers(3)]),
                                  int(rng.integers(1, 49))) for _ in range(6)]


def _check_split(name: str, fn, total: int, itemsize: int, blocks: int) -> None:
    case = f"total={total}, itemsize={itemsize}, blocks={blocks}"
    align = 512 // itemsize
    share = -(-total // blocks)
    limit = -(-share // align) * align
    covered = 0
    for b in range(blocks):
        got = call_learner(name, fn, total, itemsize, b, blocks)
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(name, f"for [{case}] block {b}: expected a tuple (start, length), got {got!r}")
        start = as_int(name, got[0], f"for [{case}] block {b}: start")
        length = as_int(name, got[1], f"for [{case}] block {b}: length")
        if length < 0:
            raise CheckFailed(name, f"for [{case}] block {b} gets a negative length ({length}) at start {start}: "
                                    f"a block with nothing left must get length 0")
        if length == 0:
            continue
        if start % align:
            raise CheckFailed(name, f"for [{case}] block {b} starts at element {start} = byte {start * itemsize}, "
                                    f"not a multiple of 512: round each share up to whole 512-byte chunks "
                                    f"({align} elements of {itemsize} B)")
        if start != covered:
            what = (f"elements {covered} to {start - 1} belong to no block" if start > covered else
                    f"elements {start} to {covered - 1} belong to two blocks")
            raise CheckFailed(name, f"for [{case}] block {b} starts at {start}, but the blocks before it end at "
                                    f"{covered}: {what}")
        if length > limit:
            raise CheckFailed(name, f"for [{case}] block {b} gets {length} elements; an equal share rounded up to "
                                    f"512 B is {limit}: the work is not balanced over the blocks")
        covered = start + length
    if covered != total:
        raise CheckFailed(name, f"for [{case}] the blocks cover [0, {covered}) but the vector has {total} elements: "
                                f"elements {covered} to {total - 1} are never computed")


def block_range(fn, kernel) -> None:
    """Lab 01, exercise 3: ``fn(total, itemsize, block, blocks) -> (start, length)`` splits the vector into
    balanced parts starting on 512 B boundaries that cover it once; ``kernel`` (using it) is correct on
    several cores."""
    __tracebackhide__ = True
    name = "block_range"
    cases = _split_cases()
    for total, isz, blocks in cases:
        _check_split(name, fn, total, isz, blocks)
    runs = [(100_003, 4096, 3, 2, np.float16), (20_000, 1024, 8, 2, np.float32), (1000, 256, 5, 1, np.float16)]
    for i, (total, tile, bd, bufs, dt) in enumerate(runs):
        case = {"total": total, "tile": tile, "block_dim": bd, "buffer_num": bufs, "dtype": np.dtype(dt).name}
        x, y = _inputs(total, dt, fixed_rng(name, i))
        z = np.full_like(x, np.nan)
        run = run_kernel(name, kernel, bd, x, y, z, total, tile, bufs, case=case)
        compare(name, z, x + y, case, causes="Each block must work on exactly its own part of the vectors.")
        _require_add_work(name, run.profile, x, case)
    passed(name, f"{len(cases)} hidden splits (up to 48 blocks, 1-, 2- and 4-byte elements) and "
                 f"{len(runs)} multi-core runs")
